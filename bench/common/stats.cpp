#include "stats.hpp"

#include <algorithm>

namespace netsparse::bench {

World init_world(int& argc, char**& argv, int required) {
  World w;
  MPI_Init_thread(&argc, &argv, required, &w.provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  return w;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

double reduce_over_ranks(double v, MPI_Op op, MPI_Comm comm) {
  double out = 0.0;
  MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, op, comm);
  return out;
}

double max_over_ranks(double v, MPI_Comm comm) {
  return reduce_over_ranks(v, MPI_MAX, comm);
}

}  // namespace netsparse::bench
