// The pieces of the extension module skinny._skinny, one file each; module.cpp puts them together.
#pragma once

#include <nanobind/nanobind.h>

namespace skinny::python {

void register_errors();                   // errors.cpp: skinny's exceptions -> Python's
void bind_kmeans(nanobind::module_& m);   // kmeans.cpp
void bind_gemm(nanobind::module_& m);     // gemm.cpp
void bind_abft(nanobind::module_& m);     // abft.cpp

}  // namespace skinny::python
