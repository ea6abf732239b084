// A generator named by a specification string ("gen:kron:16", "gen:road:64:64:0.01"): what
// load_distributed_matrix and netsparse_emulate both take, parsed in one place.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "netsparse/csr.hpp"
#include "netsparse/generators.hpp"

namespace netsparse {

using GeneratorParams = std::variant<KroneckerParams, StencilParams, RoadParams, WebParams>;

// The generator forms, one per line (part of matrix_spec_help and the emulator's --help):
//   gen:kron:SCALE[:EDGE_FACTOR[:SEED]]
//   gen:stencil:N | gen:stencil:NX:NY:NZ[:DOF]
//   gen:road:W | gen:road:WIDTH:HEIGHT[:LONG_FRACTION[:SEED[:GRID_FRACTION]]]
//   gen:web:ROWS[:MEAN_DEGREE[:LOCAL_FRACTION[:SEED]]]
[[nodiscard]] std::string generator_spec_help();

// std::nullopt unless `spec` starts with "gen:". A SEED left out is `default_seed`. Throws
// std::invalid_argument naming the field and the accepted forms for a malformed specification.
[[nodiscard]] std::optional<GeneratorParams> parse_generator_spec(std::string_view spec,
                                                                  std::uint64_t default_seed = 1);

// The matrix's rows, and rows [row_begin, row_end) of it (the generator's own function).
[[nodiscard]] gidx_t generator_rows(const GeneratorParams& params);
[[nodiscard]] CsrMatrix generate_rows(const GeneratorParams& params, gidx_t row_begin,
                                      gidx_t row_end);

}  // namespace netsparse
