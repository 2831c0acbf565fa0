#!/usr/bin/env python3
"""cmake/check_coroutines.py (the g++ 12 coroutine-hazard checker) on each unsafe form, each safe
form, and the near-misses a lexical check could confuse with them: a co_await inside a lambda body
inside a condition, the text inside strings and comments, multi-line expressions. Runs the script
as a user does (a process, files on disk): its lines, its exit codes, its --stamp.

    python3 tests/check/test_check_coroutines.py [path/to/check_coroutines.py]
"""
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "cmake", "check_coroutines.py")

CONDITION = "co_await in"
AGGREGATE = "temporary"  # an aggregate's, or a lambda's that copies
LAMBDA = "capturing lambda coroutine"

# What the snippets take for granted: an aggregate with heap members, one with a constructor, a
# trivially destructible one, a template aggregate.
PRELUDE = """\
#include <string>
struct Pub { std::string topic; std::string payload; };
struct Msg { explicit Msg(std::string t); std::string text; };
struct Hop { Scheduler* to; int n = 0; bool await_ready() const noexcept { return false; } };
template <class T> struct Box { T value; };
namespace ns { struct Note { std::string text; }; }
class Hidden { std::string secret; public: std::string shown; };
"""
PRELUDE_LINES = PRELUDE.count("\n")


def run(args, cwd=None):
    cp = subprocess.run([sys.executable, SCRIPT] + args, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True, cwd=cwd)
    return cp.returncode, cp.stdout, cp.stderr


class Snippets(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="galay-check-")
        self.addCleanup(self.dir.cleanup)

    def check(self, body, *extra, prelude=True, name="snippet.cpp"):
        """Findings [(line within `body`, form)] for the C++ `body`."""
        text = (PRELUDE if prelude else "") + textwrap.dedent(body)
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        rc, out, err = run(list(extra) + [path])
        found = []
        for line in out.splitlines():
            m = re.match(re.escape(path) + r":(\d+): (.*?): (.*)$", line)
            self.assertIsNotNone(m, f"not file:line: form: safe form: {line!r}")
            self.assertTrue(m.group(3), line)
            form = next(f for f in (CONDITION, LAMBDA, AGGREGATE) if f in m.group(2))
            found.append((int(m.group(1)) - (PRELUDE_LINES if prelude else 0), form))
        self.assertEqual(rc, 1 if found else 0, f"exit code for {found}: {err}")
        return found

    # --- co_await in a condition -------------------------------------------------------------

    def test_the_forms_the_readme_lists(self):
        self.assertEqual(self.check("""\
            Task<void> f(Stream& s, Listener& l, std::span<const char> b) {
                if (!co_await s.send_all(b)) co_return;
                while (auto c = co_await l.accept()) serve(std::move(*c));
                if (auto r = co_await s.send_all(b); !r) co_return;
            }
            """), [(2, CONDITION), (3, CONDITION), (4, CONDITION)])

    def test_for_switch_do_while_and_a_multi_line_condition(self):
        self.assertEqual(self.check("""\
            Task<void> f(Source& src) {
                for (int i = 0; co_await src.more(); ++i) {}
                switch (co_await src.kind()) { default: break; }
                do {
                } while (co_await src.more());
                if (ready &&
                    !co_await
                        src.more(
                            1)) {
                    co_return;
                }
            }
            """), [(2, CONDITION), (3, CONDITION), (5, CONDITION), (7, CONDITION)])

    def test_condition_macros_gtest_assert_and_named_ones(self):
        body = """\
            Task<void> f(Source& src) {
                EXPECT_TRUE(co_await src.more());
                ASSERT_EQ(co_await src.count(), 3);
                assert(co_await src.more());
                CO_CHECK(co_await src.more());
            }
            """
        self.assertEqual(self.check(body), [(2, CONDITION), (3, CONDITION), (4, CONDITION)])
        self.assertEqual(self.check(body, "--condition-macro", "CO_CHECK"),
                         [(2, CONDITION), (3, CONDITION), (4, CONDITION), (5, CONDITION)])

    def test_co_await_in_the_body_of_an_if_is_fine(self):
        self.assertEqual(self.check("""\
            Task<int> f(Source& src, bool fast) {
                if (fast) co_return co_await src.count();
                while (true) { auto n = co_await src.count(); if (!n) break; }
                auto r = co_await src.more();
                if (!r) co_return 0;
                for (;;) {
                    auto more = co_await src.more();
                    if (!more) break;
                }
                co_return 1;
            }
            """), [])

    def test_co_await_inside_a_lambda_body_inside_a_condition_is_the_lambdas(self):
        self.assertEqual(self.check("""\
            Task<void> f(Source& src) {
                if (block_on([](Source* s) -> Task<bool> { co_return co_await s->more(); }(&src)))
                    co_return;
                while (std::ranges::any_of(v, [](int x) { return x > 0; })) {}
                if (ok([]() -> Task<bool> {
                        auto r = co_await g();
                        if (!r) co_return false;
                        co_return true;
                    }())) {}
            }
            """), [])

    def test_the_text_in_strings_and_comments_is_not_code(self):
        self.assertEqual(self.check("""\
            // if (!co_await s.send_all(b)) co_return;
            /* while (auto c = co_await l.accept())
               co_await ch.send(Pub{topic, payload}); */
            const char* a = "if (!co_await s.send_all(b))";
            const char* b = R"x(while (co_await l.accept()) ")" spawn([&]() -> Task<void> { co_await x; }()); )x";
            const char* c = u8"if (co_await s)";
            char q = '(';
            char e = '\\'';
            long big = 1'000'000;
            Task<void> f(Source& src) {
                if (!co_await src.more()) co_return; // still found after all of the above
            }
            """), [(11, CONDITION)])

    def test_a_range_for_over_co_await_is_not_reported(self):
        self.assertEqual(self.check("""\
            Task<void> f(std::vector<Task<int>> v) {
                for (auto& n : co_await when_all(std::move(v))) use(n);
                for (int i = flag ? 1 : 2; co_await more(); ++i) {}
            }
            """), [(3, CONDITION)])

    # --- aggregate temporaries -----------------------------------------------------------------

    def test_an_aggregate_temporary_in_a_co_await(self):
        self.assertEqual(self.check("""\
            Task<void> f(Channel<Pub>& ch, Channel<ns::Note>& notes, std::string t, std::string p) {
                co_await ch.send(Pub{t, p});
                auto r = co_await ch.send(Pub{
                    t,
                    p});
                co_await notes.send(ns::Note{t});
                co_await ch.send({.topic = t, .payload = p});
                co_await boxes.send(Box<std::string>{t});
                co_await hidden.send(Hidden{});
            }
            """), [(2, AGGREGATE), (3, AGGREGATE), (6, AGGREGATE), (7, AGGREGATE), (8, AGGREGATE)])

    def test_an_aggregate_temporary_elsewhere_in_the_statement_of_a_co_await(self):
        # The temporary lives to the end of the full expression: across the suspension.
        self.assertEqual(self.check("""\
            Task<void> f(std::string t) {
                log(Pub{t, t}, co_await g());
            }
            """), [(2, AGGREGATE)])

    def test_the_safe_forms_of_an_aggregate(self):
        self.assertEqual(self.check("""\
            Task<void> f(Channel<Pub>& ch, Channel<Msg>& msgs, Scheduler* there, std::string t) {
                co_await ch.emplace(t, t);
                Pub msg{t, t};
                co_await ch.send(std::move(msg));
                Pub other = Pub{t, t};
                co_await ch.send(std::move(other));
                co_await msgs.send(Msg{t});
                co_await Hop{there};
                co_await Hop{.to = there};
                co_await out.send_all(std::string{t});
                co_await pairs.send(std::pair{t, t});
                bus.send(Pub{t, t});
                co_await copy(a, b, {.idle_timeout = idle, .splice = false});
                auto [x, y] = co_await when_all(g(), h());
                co_await g(Box<int>{1}.value);
            }
            """), [(15, AGGREGATE)])  # Box<int>: T is not known to be trivial

    def test_a_lambda_temporary_that_copies_in_a_co_await_statement(self):
        # g++ 12 destroys such a closure twice too (tests/unit/closure_temporary_test.cpp).
        self.assertEqual(self.check("""\
            struct Options { unsigned workers = 1; std::string name; };
            Task<void> f(std::string s, std::vector<int> v, Options o, int n, char* p) {
                auto a = co_await spawn_blocking([s] { return s.size(); });
                auto b = co_await on(1, [v = std::move(v)](Store& st) { return v.size(); });
                co_await [=]() -> Task<void> { co_await use(s); }();
                auto c = co_await spawn_blocking([n, p, w = o.workers, &s] { return n; });
                auto d = co_await spawn_blocking([&] { return s.size(); });
                auto fn = [s] { return s.size(); };
                auto e = co_await spawn_blocking(std::move(fn));
                auto g = co_await spawn_blocking([name = o.name] { return name.size(); });
            }
            """, prelude=False), [(3, AGGREGATE), (4, AGGREGATE), (5, AGGREGATE), (10, AGGREGATE)])

    def test_types_come_from_the_headers_found_with_I(self):
        inc = os.path.join(self.dir.name, "inc")
        os.makedirs(os.path.join(inc, "app"))
        with open(os.path.join(inc, "app", "msg.hpp"), "w") as f:
            f.write("struct Event { std::string name; std::vector<int> data; };\n")
        body = """\
            #include <app/msg.hpp>
            Task<void> f(Channel<Event>& ch) {
                co_await ch.send(Event{"a", {}});
            }
            """
        self.assertEqual(self.check(body, prelude=False), [])  # not known without -I
        self.assertEqual(self.check(body, "-I", inc, prelude=False), [(3, AGGREGATE)])

    # --- capturing lambda coroutines -----------------------------------------------------------

    def test_a_copy_of_a_type_named_through_an_alias(self):
        # `using OpCode = Kind;`: a member of the alias's type is as trivial as what it names.
        self.assertEqual(self.check("""\
            enum class Kind { read, write };
            using OpCode = Kind;
            using Text = std::string;
            struct Op { OpCode code{}; int fd = -1; };
            struct Named { Text name; };
            Task<void> f(Op op, Named n) {
                const Op copy = op;
                auto a = co_await spawn_blocking([copy] { return copy.fd; });
                auto b = co_await spawn_blocking([n] { return n.name.size(); });
            }
            """, prelude=False), [(9, AGGREGATE)])

    def test_capturing_lambda_coroutines_whose_task_escapes(self):
        self.assertEqual(self.check("""\
            Task<void> start(Runtime& rt, int n) {
                galay::spawn([&]() -> Task<void> { co_await work(n); }());
                auto t = [n]() -> Task<int> { co_return n; }();
                rt.spawn_on(1, [=]() mutable -> Task<void> {
                    co_await work(n);
                }());
                tasks.push_back([this] -> Task<void> { co_await work(1); }());
                co_return;
            }
            Task<void> make(int n) {
                return [n]() -> Task<void> { co_await work(n); }();
            }
            """), [(2, LAMBDA), (3, LAMBDA), (4, LAMBDA), (7, LAMBDA), (11, LAMBDA)])

    def test_lambdas_that_live_as_long_as_their_task(self):
        self.assertEqual(self.check("""\
            Task<void> f(Runtime& rt, int n) {
                co_await [&]() -> Task<void> { co_await work(n); }();
                co_await when_all([&]() -> Task<void> { co_await work(n); }(), g());
                int v = block_on([&]() -> Task<int> { co_return n; }());
                int w = rt.spawn([&]() -> Task<int> { co_return n; }()).join();
                galay::spawn([](int k) -> Task<void> { co_await work(k); }(n));
                auto body = [&](TcpStream s) -> Task<void> { co_await echo(s, n); };
                serve(rt, addr, [&](TcpStream s) -> Task<void> { co_await echo(s, n); });
                auto text = co_await spawn_blocking([&] { return read(n); });
                auto plain = [&] { return n; }();
            }
            """), [])

    def test_a_runner_named_on_the_command_line(self):
        body = """\
            void test() {
                run([&]() -> Task<void> { co_await work(n); }());
            }
            """
        self.assertEqual(self.check(body), [(2, LAMBDA)])
        self.assertEqual(self.check(body, "--runner", "run"), [])

    # --- the marker, markdown, the command line ------------------------------------------------

    def test_the_marker_keeps_a_line_on_purpose(self):
        self.assertEqual(self.check("""\
            Task<void> f(Channel<Pub>& ch, std::string t) {
                // coroutine-hazard-ok: this test shows what the hazard does
                co_await ch.send(Pub{t, t});
                co_await ch.send(Pub{t, t}); // coroutine-hazard-ok
                co_await ch.send(Pub{t, t});
            }
            """), [(5, AGGREGATE)])

    def test_markdown_code_blocks_keep_their_line_numbers(self):
        path = os.path.join(self.dir.name, "page.md")
        with open(path, "w") as f:
            f.write("# A page\n\n`if (!co_await x)` in text is not code.\n\n```cpp\n"
                    "Task<void> f(S& s) {\n    if (!co_await s.more()) co_return;\n}\n```\n\n"
                    "```sh\nif (co_await) not cpp\n```\n")
        rc, out, _ = run([path])
        self.assertEqual(rc, 1)
        self.assertEqual([l.split(": ")[0] for l in out.splitlines()], [f"{path}:7"])

    def test_a_directory_is_every_cpp_file_under_it_and_stamp_marks_a_clean_run(self):
        d = os.path.join(self.dir.name, "tree")
        os.makedirs(os.path.join(d, "sub"))
        with open(os.path.join(d, "sub", "ok.cpp"), "w") as f:
            f.write("Task<void> f(S& s) { auto r = co_await s.more(); if (!r) co_return; }\n")
        with open(os.path.join(d, "notes.txt"), "w") as f:
            f.write("if (!co_await s.more()) co_return;\n")
        stamp = os.path.join(self.dir.name, "stamp")
        rc, out, err = run(["--stamp", stamp, d])
        self.assertEqual((rc, out), (0, ""), err)
        self.assertTrue(os.path.exists(stamp))
        os.remove(stamp)
        with open(os.path.join(d, "bad.hpp"), "w") as f:
            f.write("Task<void> f(S& s) {\n  if (!co_await s.more()) co_return;\n}\n")
        rc, out, err = run(["--stamp", stamp, d])
        self.assertEqual(rc, 1)
        self.assertEqual(out.splitlines()[0].split(": ")[0], os.path.join(d, "bad.hpp") + ":2")
        self.assertIn("1 unsafe form in 2 files", err)
        self.assertFalse(os.path.exists(stamp), "a failed check must not leave its stamp")

    def test_usage_errors_are_one_line_and_exit_2(self):
        for args, flag in ((["--bogus", "x.cpp"], "--bogus"), ([], "FILE|DIR"),
                           (["/nonexistent/file.cpp"], "/nonexistent/file.cpp"),
                           (["-I", "/nonexistent/dir", SCRIPT], "-I")):
            rc, out, err = run(args)
            self.assertEqual(rc, 2, args)
            self.assertEqual(out, "")
            lines = err.strip().splitlines()
            self.assertEqual(len(lines), 1, err)
            self.assertRegex(lines[0], r"^check_coroutines: error: .*\(see --help\)$")
            self.assertIn(flag, lines[0])

    def test_help_goes_to_stdout_and_exits_0(self):
        rc, out, err = run(["--help"])
        self.assertEqual((rc, err), (0, ""))
        self.assertIn("usage: check_coroutines", out)
        self.assertIn("co_await in a condition", out)


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        SCRIPT = sys.argv.pop(1)
    unittest.main(verbosity=1)
