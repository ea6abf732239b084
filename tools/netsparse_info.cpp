// netsparse_info: what this build of NetSparse contains (transports, kernel instruction sets)
// and its configuration table (lib/config/settings.hpp) with the values in effect here, like
// `ucx_info -c`. Exit status 1 when a NETSPARSE_* variable set here has a bad value.
//
//   netsparse_info              the features, the environment variables, the context attributes
//   netsparse_info --markdown   the README's environment table (tests/config checks the README)
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "config/settings.hpp"
#include "netsparse/config.h"
#include "netsparse/local_kernels.hpp"
#include "transport/transport.hpp"

namespace {

namespace cfg = netsparse::config;

const char* type_name(cfg::Type t) {
  switch (t) {
    case cfg::Type::kChoice:
      return "choice";
    case cfg::Type::kInteger:
      return "integer";
    case cfg::Type::kReal:
      return "number";
    case cfg::Type::kText:
      return "text";
  }
  return "?";
}

std::string range_text(const cfg::Setting& s) {
  char buf[96];
  switch (s.type) {
    case cfg::Type::kChoice:
      return s.choices;
    case cfg::Type::kInteger:
      std::snprintf(buf, sizeof buf, "[%.0f, %.0f]", s.lo, s.hi);
      return buf;
    case cfg::Type::kReal:
      std::snprintf(buf, sizeof buf, "(%g, %g]", s.lo, s.hi);
      return buf;
    case cfg::Type::kText:
      return "text";
  }
  return {};
}

// One README row per variable: | `NAME` | default | accepted | meaning |
void print_markdown() {
  std::printf("| variable | default | accepted | meaning |\n|---|---|---|---|\n");
  for (const cfg::Setting& s : cfg::kEnvironment) {
    std::string accepted = range_text(s);
    for (std::size_t at = 0; (at = accepted.find('|', at)) != std::string::npos; at += 2)
      accepted.replace(at, 1, "\\|");
    std::printf(
        "| `%s` | %s | %s | %s%s%s |\n", s.name,
        s.default_text[0] != '\0' ? (std::string("`") + s.default_text + "`").c_str() : "computed",
        accepted.c_str(), s.doc, s.agreed ? "; must be the same on every rank" : "",
        s.scope == cfg::Scope::kBenchmark ? " (benchmarks)" : "");
  }
}

int print_table() {
  namespace tr = netsparse::transport;
  std::printf("NetSparse %s\n\nfeatures\n", NETSPARSE_VERSION_STRING);
  std::printf("  transports       inproc, mpi (+ intra-host shared-memory rings), verbs: %s\n",
              !tr::verbs_compiled_in()       ? "not in this build"
              : tr::verbs_device_available() ? "built, an RDMA port is ACTIVE"
                                             : "built, no ACTIVE RDMA port here");
  std::string isas;
  for (const std::string& isa : netsparse::supported_kernel_isas())
    isas += (isas.empty() ? "" : ", ") + isa;
  std::printf("  kernel ISAs      %s (those this CPU runs)\n", isas.c_str());
  int bad = 0;
  try {
    std::printf("  active ISA       %s\n", netsparse::active_kernel_isa().c_str());
  } catch (const std::exception& e) {
    std::printf("  active ISA       error: %s\n", e.what());
    ++bad;
  }
  std::printf("\nenvironment (* = set here; agreed = must be the same on every rank)\n");
  for (int i = 0; i < static_cast<int>(cfg::Env::kCount); ++i) {
    const auto e = static_cast<cfg::Env>(i);
    const cfg::Setting& s = cfg::setting(e);
    std::string value;
    try {
      value = cfg::effective(e);
      if (value.empty()) value = "(computed)";
    } catch (const std::exception& err) {
      value = std::string("ERROR: ") + err.what();
      ++bad;
    }
    std::printf("  %-31s %s%-12s %-8s %-26s%s%s\n      %s\n", s.name, cfg::is_set(e) ? "*" : " ",
                value.c_str(), type_name(s.type), range_text(s).c_str(), s.agreed ? " agreed" : "",
                s.scope == cfg::Scope::kBenchmark ? " benchmarks" : "", s.doc);
  }
  // NETSPARSE_* names that are no setting: most likely a misspelt one (exit 1).
  const std::vector<std::string> unknown = cfg::unknown_names();
  if (!unknown.empty()) {
    std::printf("\nunknown NETSPARSE_* names (they change nothing)\n");
    for (const std::string& line : unknown) std::printf("  %s\n", line.c_str());
    bad += static_cast<int>(unknown.size());
  }
  std::printf("\ncontext attributes (ns_context_attr; the comp_mask bit selects a field)\n");
  for (const cfg::Attribute& a : cfg::kAttributes) {
    std::printf("  %-18s %-27s default %-18s [%.0f, %.0f]%s\n      %s\n", a.name, a.mask,
                a.default_text, a.lo, a.hi, a.agreed ? " agreed" : "", a.doc);
  }
  return bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "netsparse_info: the build's transports and kernel instruction sets, and the "
      "configuration table with the values in effect (exit 1 if a value is bad)"};
  bool markdown = false;
  app.add_flag("--markdown", markdown, "print the environment table as the README's Markdown");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "netsparse_info: %s\nusage: netsparse_info [--markdown]\n", e.what());
    return 2;
  }
  if (markdown) {
    print_markdown();
    return 0;
  }
  return print_table();
}
