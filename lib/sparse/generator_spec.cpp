// Generator specification strings (include/netsparse/generator_spec.hpp).
#include "netsparse/generator_spec.hpp"

#include <charconv>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace netsparse {

namespace {

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t pos = s.find(sep, start);
    parts.emplace_back(s.substr(start, pos == std::string_view::npos ? s.npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

[[noreturn]] void bad_spec(std::string_view spec, const std::string& why) {
  throw std::invalid_argument("matrix specification '" + std::string(spec) + "': " + why +
                              "\naccepted generator forms:\n" + generator_spec_help());
}

template <class T>
T parse_number(std::string_view spec, const std::string& field, const char* what) {
  T value{};
  const char* b = field.data();
  const char* e = field.data() + field.size();
  const auto [ptr, ec] = std::from_chars(b, e, value);
  if (field.empty() || ec != std::errc() || ptr != e) {
    throw std::invalid_argument("matrix specification '" + std::string(spec) + "': " + what + " '" +
                                field + "' is not a valid number");
  }
  return value;
}

// One numeric parameter of a generator specification: its name and where it is parsed into.
template <class T>
struct Param {
  const char* name;
  T& out;
};
template <class T>
Param(const char*, T&) -> Param<T>;

bool in_unit(double x) {
  return x >= 0 && x <= 1;
}

}  // namespace

std::string generator_spec_help() {
  return "  gen:kron:SCALE[:EDGE_FACTOR[:SEED]]          Graph500 Kronecker, 2^SCALE rows,\n"
         "                                               edge factor 16, seed 1 by default\n"
         "  gen:stencil:NX:NY:NZ[:DOF] | gen:stencil:N   3D 27-point stencil, DOF 1 default\n"
         "  gen:road:WIDTH:HEIGHT[:LONG_FRACTION[:SEED[:GRID_FRACTION]]] | gen:road:W\n"
         "                                               road-like grid + long edges (0.01),\n"
         "                                               each grid edge kept with GRID_FRACTION\n"
         "                                               (1; europe_osm's 2.1 per row: 0.53)\n"
         "  gen:web:ROWS[:MEAN_DEGREE[:LOCAL_FRACTION[:SEED]]]\n"
         "                                               web crawl in URL order: power-law\n"
         "                                               degrees (28 links drawn a page), 0.9\n"
         "                                               of them near the page, the rest to\n"
         "                                               popular pages anywhere\n";
}

std::optional<GeneratorParams> parse_generator_spec(std::string_view spec,
                                                    std::uint64_t default_seed) {
  if (spec.rfind("gen:", 0) != 0) return std::nullopt;
  const std::vector<std::string> f = split(spec, ':');
  const std::string& kind = f.size() > 1 ? f[1] : std::string();
  // The generator's parameters, fields 2, 3, ... of the specification in the order given (each
  // a Param: its name in errors, and where it goes, whose type says how it parses); the first
  // `required` of them must be there, the others keep their defaults when left out.
  const auto params = [&](std::size_t required, auto... given) {
    if (f.size() < 2 + required || f.size() > 2 + sizeof...(given)) {
      bad_spec(spec, "gen:" + kind + " takes " + std::to_string(required) + " to " +
                         std::to_string(sizeof...(given)) + " parameters");
    }
    std::size_t i = 2;
    const auto parse = [&](auto param) {
      if (i < f.size()) {
        param.out =
            parse_number<std::remove_reference_t<decltype(param.out)>>(spec, f[i], param.name);
      }
      ++i;
    };
    (parse(given), ...);
  };
  if (kind == "kron") {
    KroneckerParams p;
    p.seed = default_seed;
    params(1, Param{"SCALE", p.scale}, Param{"EDGE_FACTOR", p.edge_factor}, Param{"SEED", p.seed});
    if (p.scale < 1 || p.scale > 40) bad_spec(spec, "SCALE must be in [1, 40]");
    if (p.edge_factor < 1) bad_spec(spec, "EDGE_FACTOR must be >= 1");
    return p;
  }
  if (kind == "stencil") {
    StencilParams p;
    if (f.size() == 3) {  // gen:stencil:N, a cube
      params(1, Param{"N", p.nx});
      p.ny = p.nz = p.nx;
    } else {
      params(3, Param{"NX", p.nx}, Param{"NY", p.ny}, Param{"NZ", p.nz}, Param{"DOF", p.dof});
    }
    if (p.nx < 1 || p.ny < 1 || p.nz < 1 || p.dof < 1) bad_spec(spec, "sizes must be >= 1");
    return p;
  }
  if (kind == "road") {
    RoadParams p;
    p.seed = default_seed;
    if (f.size() == 3) {  // gen:road:W, a square
      params(1, Param{"W", p.width});
      p.height = p.width;
    } else {
      params(2, Param{"WIDTH", p.width}, Param{"HEIGHT", p.height},
             Param{"LONG_FRACTION", p.long_edge_fraction}, Param{"SEED", p.seed},
             Param{"GRID_FRACTION", p.grid_edge_fraction});
    }
    if (p.width < 1 || p.height < 1) bad_spec(spec, "sizes must be >= 1");
    if (!in_unit(p.long_edge_fraction)) bad_spec(spec, "LONG_FRACTION must be in [0, 1]");
    if (!in_unit(p.grid_edge_fraction)) bad_spec(spec, "GRID_FRACTION must be in [0, 1]");
    return p;
  }
  if (kind == "web") {
    WebParams p;
    p.seed = default_seed;
    params(1, Param{"ROWS", p.n}, Param{"MEAN_DEGREE", p.mean_degree},
           Param{"LOCAL_FRACTION", p.local_fraction}, Param{"SEED", p.seed});
    if (p.n < 1) bad_spec(spec, "ROWS must be >= 1");
    if (!(p.mean_degree >= 1 && p.mean_degree <= 10000)) {
      bad_spec(spec, "MEAN_DEGREE must be in [1, 10000]");
    }
    if (!in_unit(p.local_fraction)) bad_spec(spec, "LOCAL_FRACTION must be in [0, 1]");
    return p;
  }
  bad_spec(spec, "unknown generator '" + kind + "'");
}

gidx_t generator_rows(const GeneratorParams& params) {
  struct Rows {
    gidx_t operator()(const KroneckerParams& p) const { return gidx_t{1} << p.scale; }
    gidx_t operator()(const StencilParams& p) const {
      gidx_t n = 0;
      if (__builtin_mul_overflow(p.nx, p.ny, &n) || __builtin_mul_overflow(n, p.nz, &n) ||
          __builtin_mul_overflow(n, static_cast<gidx_t>(p.dof), &n))
        throw std::invalid_argument("gen:stencil: the matrix is too large for 64-bit indices");
      return n;
    }
    gidx_t operator()(const RoadParams& p) const { return p.width * p.height; }
    gidx_t operator()(const WebParams& p) const { return p.n; }
  };
  return std::visit(Rows{}, params);
}

CsrMatrix generate_rows(const GeneratorParams& params, gidx_t row_begin, gidx_t row_end) {
  struct Rows {
    gidx_t b, e;
    CsrMatrix operator()(const KroneckerParams& p) const { return generate_kronecker(p, b, e); }
    CsrMatrix operator()(const StencilParams& p) const { return generate_stencil27(p, b, e); }
    CsrMatrix operator()(const RoadParams& p) const { return generate_road(p, b, e); }
    CsrMatrix operator()(const WebParams& p) const { return generate_web(p, b, e); }
  };
  return std::visit(Rows{row_begin, row_end}, params);
}

}  // namespace netsparse
