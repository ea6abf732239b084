// The parts of the Python module, each registering its classes and functions on the module.
#pragma once

#include <pybind11/pybind11.h>

namespace netsparse::python {

void bind_distributed(pybind11::module_& m);  // DistMatrix, Engine, DistKernel, TransposedSpmm
void bind_rig(pybind11::module_& m);          // RigContext, RigTable: the raw RIG verb
void bind_collectives(pybind11::module_& m);  // Collectives, CollRequest (netsparse.collectives)
void bind_embedding(pybind11::module_& m);    // _EmbeddingTables (netsparse.EmbeddingTables)

}  // namespace netsparse::python
