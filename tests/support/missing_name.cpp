// Must NOT compile: a name table that leaves out an enumerator (tests/support/CMakeLists.txt
// compiles it and expects the lookup's static_assert).
#include <array>

#include "support/enum_names.hpp"

enum class Shape { kCircle, kSquare, kTriangle };

constexpr auto kShapeNames = std::to_array<netsparse::support::EnumName<Shape>>({
    {Shape::kCircle, "circle"},
    {Shape::kSquare, "square"},
});

const char* shape_name(Shape s) {
  return netsparse::support::name_of<kShapeNames>(s, "?");
}
