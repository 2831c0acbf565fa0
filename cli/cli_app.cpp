// cli::App, cli::Option and cli::Validator forwarding to CLI11, compiled once here instead of in
// every program, and the option types they are instantiated for.
#include "galay_cli.hpp"

#include <CLI/CLI.hpp>

namespace galay::tools::cli {

Validator::Validator(std::function<std::string(std::string&)> check, std::string description,
                     std::string name)
    : v_(std::make_shared<const CLI::Validator>(std::move(check), std::move(description),
                                                std::move(name))) {}

template <class T>
Validator Range(T lo, T hi) {
    return Validator(std::make_shared<const CLI::Validator>(CLI::Range(lo, hi)));
}
template Validator Range<int>(int, int);
template Validator Range<long>(long, long);
template Validator Range<long long>(long long, long long);
template Validator Range<unsigned>(unsigned, unsigned);
template Validator Range<unsigned long>(unsigned long, unsigned long);
template Validator Range<unsigned long long>(unsigned long long, unsigned long long);
template Validator Range<double>(double, double);

Validator IsMember(std::vector<std::string> members) {
    return Validator(std::make_shared<const CLI::Validator>(CLI::IsMember(std::move(members))));
}

const Validator PositiveNumber{std::make_shared<const CLI::Validator>(CLI::PositiveNumber)};
const Validator NonNegativeNumber{std::make_shared<const CLI::Validator>(CLI::NonNegativeNumber)};
const Validator ExistingDirectory{std::make_shared<const CLI::Validator>(CLI::ExistingDirectory)};
const Validator ExistingFile{std::make_shared<const CLI::Validator>(CLI::ExistingFile)};

Option* Option::check(const Validator& v) {
    o_->check(v.get());
    return this;
}
Option* Option::transform(const Validator& v) {
    o_->transform(v.get());
    return this;
}
Option* Option::capture_default_str() {
    o_->capture_default_str();
    return this;
}
Option* Option::required(bool value) {
    o_->required(value);
    return this;
}
Option* Option::excludes(Option* other) {
    o_->excludes(other->o_);
    return this;
}
Option* Option::needs(Option* other) {
    o_->needs(other->o_);
    return this;
}
Option* Option::expected(int n) {
    o_->expected(n);
    return this;
}
Option* Option::type_name(std::string name) {
    o_->type_name(std::move(name));
    return this;
}
Option* Option::group(std::string name) {
    o_->group(std::move(name));
    return this;
}
Option* Option::default_str(std::string text) {
    o_->default_str(std::move(text));
    return this;
}
Option* Option::delimiter(char c) {
    o_->delimiter(c);
    return this;
}
Option* Option::take_last() {
    o_->take_last();
    return this;
}
std::size_t Option::count() const {
    return o_->count();
}

App::App(std::string description, std::string name)
    : owned_(std::make_unique<CLI::App>(std::move(description), std::move(name)))
    , app_(owned_.get()) {}
App::App(CLI::App* subcommand)
    : app_(subcommand) {}
App::~App() = default;

Option* App::keep(CLI::Option* o) {
    return &options_.emplace_back(o);
}

template <class T>
Option* App::add_option(std::string name, T& variable, std::string description) {
    return keep(app_->add_option(std::move(name), variable, std::move(description)));
}
template <class T>
Option* App::add_option_function(std::string name, std::function<void(const T&)> f,
                                 std::string description) {
    return keep(
        app_->add_option_function<T>(std::move(name), std::move(f), std::move(description)));
}
Option* App::add_flag(std::string name, std::string description) {
    const std::string& text = description; // (CLI11 takes the description as a const lvalue)
    return keep(app_->add_flag(std::move(name), text));
}
Option* App::add_flag_callback(std::string name, std::function<void()> f, std::string description) {
    return keep(app_->add_flag_callback(std::move(name), std::move(f), std::move(description)));
}
template <class T>
Option* App::add_flag(std::string name, T& variable, std::string description) {
    return keep(app_->add_flag(std::move(name), variable, std::move(description)));
}

// The option types the programs use. A new one is one line here (the linker names it).
#define GALAY_CLI_OPTION_TYPE(T)                                                                   \
    template Option* App::add_option<T>(std::string, T&, std::string);                             \
    template Option* App::add_option_function<T>(std::string, std::function<void(const T&)>,       \
                                                 std::string);
GALAY_CLI_OPTION_TYPE(bool)
GALAY_CLI_OPTION_TYPE(int)
GALAY_CLI_OPTION_TYPE(long)
GALAY_CLI_OPTION_TYPE(long long)
GALAY_CLI_OPTION_TYPE(unsigned short)
GALAY_CLI_OPTION_TYPE(unsigned)
GALAY_CLI_OPTION_TYPE(unsigned long)
GALAY_CLI_OPTION_TYPE(unsigned long long)
GALAY_CLI_OPTION_TYPE(double)
GALAY_CLI_OPTION_TYPE(std::string)
GALAY_CLI_OPTION_TYPE(std::vector<std::string>)
GALAY_CLI_OPTION_TYPE(std::vector<int>)
GALAY_CLI_OPTION_TYPE(std::vector<unsigned>)
GALAY_CLI_OPTION_TYPE(std::optional<unsigned long>)
#undef GALAY_CLI_OPTION_TYPE
template Option* App::add_flag<bool>(std::string, bool&, std::string);
template Option* App::add_flag<int>(std::string, int&, std::string);

App* App::add_subcommand(std::string name, std::string description) {
    CLI::App* sub = app_->add_subcommand(std::move(name), std::move(description));
    return subcommands_.emplace_back(new App(sub)).get();
}
App* App::require_subcommand(int n) {
    app_->require_subcommand(n);
    return this;
}
App* App::require_subcommand(std::size_t min, std::size_t max) {
    app_->require_subcommand(min, max);
    return this;
}
Option* App::set_help_flag(std::string name, std::string description) {
    CLI::Option* o = app_->set_help_flag(std::move(name), std::move(description));
    return o ? keep(o) : nullptr;
}
Option* App::set_version_flag(std::string name, std::string version) {
    CLI::Option* o = app_->set_version_flag(std::move(name), std::move(version));
    return o ? keep(o) : nullptr;
}
App* App::column_width(std::size_t width) {
    app_->get_formatter()->column_width(width);
    return this;
}
bool App::parsed() const {
    return app_->parsed();
}
std::size_t App::count(std::string option_name) const {
    return app_->count(option_name);
}

} // namespace galay::tools::cli
