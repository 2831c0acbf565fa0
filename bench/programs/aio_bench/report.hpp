// Output: the text report, the JSON object (--json), the engine comparison (--compare).
// The JSON keys are listed in README.md; every figure comes from measured ns counts and byte
// counts, never from a rounded duration.
#pragma once

#include "bench.hpp"
#include "config.hpp"
#include "target.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace aiob {

void print_header(std::FILE* out, const Config& cfg, const Target& t, uint64_t seed);
void print_text(std::FILE* out, const Config& cfg, const Results& r);
void print_errors(std::FILE* err, const Results& r); // the sampled I/O and verify errors
void print_live(std::FILE* out, const char* prefix, const SecondSample& s);

nlohmann::json config_json(const Config& cfg, const Target& t, uint64_t seed);
nlohmann::json results_json(const Config& cfg, const Results& r);

void print_compare(std::FILE* out, const Config& cfg, const Results& a, const Results& b);
nlohmann::json compare_json(const Config& cfg, const Target& t, uint64_t seed, const Results& a,
                            const Results& b);

} // namespace aiob
