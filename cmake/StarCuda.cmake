# CUDA and NCCL for the shim's NCCL collective backend (STAR_WITH_CUDA).
# The backend needs the CUDA runtime and NCCL, headers and shared libraries, and no nvcc
# (STAR has no kernels). They are looked for under one root:
#   STAR_CUDA_ROOT   -D or environment: a CUDA toolkit, or the directory that
#                    scripts/install-cuda.sh prints (NVIDIA's wheels); default /usr/local/cuda
# STAR_WITH_CUDA defaults ON where the root has include/cuda_runtime.h and include/nccl.h,
# and follows that default when the root changes (given later, or installed later) unless
# it was set by hand. With STAR_WITH_CUDA on, defines the IMPORTED targets
#   star::cudart  star::nccl   the shared libraries, with their include directory
# Test binaries find the libraries through the build tree's RPATH.

set(STAR_CUDA_ROOT "" CACHE PATH
    "CUDA runtime and NCCL root (empty: \$ENV{STAR_CUDA_ROOT}, else /usr/local/cuda)")
if(STAR_CUDA_ROOT)
  set(_star_cuda_root "${STAR_CUDA_ROOT}")
elseif(DEFINED ENV{STAR_CUDA_ROOT} AND NOT "$ENV{STAR_CUDA_ROOT}" STREQUAL "")
  set(_star_cuda_root "$ENV{STAR_CUDA_ROOT}")
else()
  set(_star_cuda_root "/usr/local/cuda")
endif()

set(_star_cuda_default OFF)
if(EXISTS "${_star_cuda_root}/include/cuda_runtime.h" AND EXISTS "${_star_cuda_root}/include/nccl.h")
  set(_star_cuda_default ON)
elseif(STAR_CUDA_ROOT)
  message(FATAL_ERROR "STAR_CUDA_ROOT=${STAR_CUDA_ROOT} has no include/cuda_runtime.h and "
                      "include/nccl.h: pass what scripts/install-cuda.sh prints, or a CUDA toolkit")
endif()
# An option keeps its first value: this one follows the default until it is set by hand
# (a value other than the default it was last given, or one given on the first configure;
# -USTAR_WITH_CUDA goes back to the default).
if(NOT DEFINED CACHE{STAR_WITH_CUDA})
  unset(_STAR_WITH_CUDA_BY_HAND CACHE)
elseif(NOT DEFINED CACHE{_STAR_WITH_CUDA_DEFAULT} OR NOT STAR_WITH_CUDA STREQUAL _STAR_WITH_CUDA_DEFAULT)
  set(_STAR_WITH_CUDA_BY_HAND ON CACHE INTERNAL "STAR_WITH_CUDA was set by hand")
endif()
if(DEFINED CACHE{STAR_WITH_CUDA} AND NOT _STAR_WITH_CUDA_BY_HAND)
  set_property(CACHE STAR_WITH_CUDA PROPERTY VALUE ${_star_cuda_default})
endif()
option(STAR_WITH_CUDA "Build the CUDA/NCCL collective backend" ${_star_cuda_default})
set(_STAR_WITH_CUDA_DEFAULT ${_star_cuda_default} CACHE INTERNAL "STAR_WITH_CUDA's last default")

if(STAR_WITH_CUDA)
  # Found paths are cached: look again when the root changes.
  if(NOT "${_star_cuda_root}" STREQUAL "${_STAR_CUDA_SEARCHED_ROOT}")
    foreach(_var STAR_CUDART_INCLUDE_DIR STAR_NCCL_INCLUDE_DIR STAR_CUDART_LIBRARY STAR_NCCL_LIBRARY)
      unset(${_var} CACHE)
    endforeach()
    set(_STAR_CUDA_SEARCHED_ROOT "${_star_cuda_root}" CACHE INTERNAL "root of the cached CUDA paths")
  endif()
  find_path(STAR_CUDART_INCLUDE_DIR cuda_runtime.h HINTS "${_star_cuda_root}/include")
  find_path(STAR_NCCL_INCLUDE_DIR nccl.h HINTS "${_star_cuda_root}/include")
  find_library(STAR_CUDART_LIBRARY cudart HINTS "${_star_cuda_root}/lib64" "${_star_cuda_root}/lib")
  find_library(STAR_NCCL_LIBRARY nccl HINTS "${_star_cuda_root}/lib64" "${_star_cuda_root}/lib")
  foreach(_var STAR_CUDART_INCLUDE_DIR STAR_NCCL_INCLUDE_DIR STAR_CUDART_LIBRARY STAR_NCCL_LIBRARY)
    if(NOT ${_var})
      message(FATAL_ERROR "STAR_WITH_CUDA=ON, but ${_var} was not found (root ${_star_cuda_root}): "
                          "pass -DSTAR_CUDA_ROOT=\"$(bash scripts/install-cuda.sh)\", "
                          "or -DSTAR_WITH_CUDA=OFF")
    endif()
  endforeach()

  add_library(star::cudart SHARED IMPORTED)
  set_target_properties(star::cudart PROPERTIES
    IMPORTED_LOCATION "${STAR_CUDART_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${STAR_CUDART_INCLUDE_DIR}")
  add_library(star::nccl SHARED IMPORTED)
  set_target_properties(star::nccl PROPERTIES
    IMPORTED_LOCATION "${STAR_NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${STAR_NCCL_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES star::cudart)

  file(STRINGS "${STAR_CUDART_INCLUDE_DIR}/cuda_runtime_api.h" _cudart_version
       REGEX "^#define CUDART_VERSION +[0-9]+")
  string(REGEX REPLACE "^#define CUDART_VERSION +" "" _cudart_version "${_cudart_version}")
  file(STRINGS "${STAR_NCCL_INCLUDE_DIR}/nccl.h" _nccl_version
       REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  string(REGEX REPLACE "#define NCCL_[A-Z]+ +" "" _nccl_version "${_nccl_version}")
  string(REPLACE ";" "." _nccl_version "${_nccl_version}")
  message(STATUS "STAR: CUDA runtime ${_cudart_version} (${STAR_CUDART_LIBRARY}), "
                 "NCCL ${_nccl_version} (${STAR_NCCL_LIBRARY})")
endif()
