# Finds the chosen dependencies. The DPF core (dpf/) needs only Abseil and libsodium; the rest is
# optional so that the GPU machine (no Debian libraries) can build dpf/ and gpu/ alone.
find_package(Threads REQUIRED)
find_package(absl REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(SODIUM REQUIRED IMPORTED_TARGET libsodium)

find_package(GTest)
find_package(benchmark)
find_package(OpenSSL)  # TLS of the server and client (with kj-tls); AES oracle of the dpf tests

find_path(GMP_INCLUDE_DIR gmp.h)
find_library(GMP_LIBRARY gmp)

if(VEIL_ENABLE_SERVER)
  find_package(CapnProto)
  if(NOT CapnProto_FOUND OR NOT OpenSSL_FOUND OR NOT TARGET CapnProto::kj-tls)
    message(STATUS "Cap'n Proto (with kj-tls) or OpenSSL not found: server and client are not built")
    set(VEIL_ENABLE_SERVER OFF)
  endif()
  # veil-server --metrics (Prometheus); without it the flag is refused.
  find_package(prometheus-cpp CONFIG QUIET)
  if(NOT TARGET prometheus-cpp::pull)
    message(STATUS "prometheus-cpp not found: veil-server --metrics is not available")
  endif()
endif()

if(VEIL_ENABLE_TORCH)
  find_package(Torch QUIET)
  if(Torch_FOUND)
    message(STATUS "libtorch found: ${TORCH_LIBRARIES}")
  else()
    message(STATUS "libtorch not found: training tools and PrivateEmbeddingBag are not built")
    set(VEIL_ENABLE_TORCH OFF)
  endif()
endif()

if(VEIL_HAVE_CUDA)
  find_package(CUDAToolkit REQUIRED)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    add_library(veil_nccl INTERFACE)
    target_include_directories(veil_nccl INTERFACE ${NCCL_INCLUDE_DIR})
    target_link_libraries(veil_nccl INTERFACE ${NCCL_LIBRARY})
    set(VEIL_HAVE_NCCL ON)
  endif()
endif()
