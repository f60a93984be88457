# `cmake --install`: the headers, the libraries a deployment links (the runtime, its conveniences,
# the CPU kernels and, when built, the CUDA backend), the `baton` CLI, and a CMake package so that
# another project links Baton with
#
#   find_package(Baton REQUIRED)              # components: cuda (present when Baton has it)
#   target_link_libraries(app PRIVATE Baton::runtime)   # + Baton::cuda for GPU programs
#
# The libraries are static; their own dependencies (fmt, flatbuffers, OpenBLAS, nlohmann-json,
# the CUDA toolkit's cudart and cuBLASLt) are found again by BatonConfig.cmake. The compiler
# library (protobuf, ONNX) is not installed: programs are compiled with the CLI.
include(CMakePackageConfigHelpers)

set(BATON_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Baton)
set(BATON_EXPORTED_TARGETS baton_core baton_ops baton_schema baton_format baton_runtime
                           baton_kernels_cpu baton_extension baton_deploy baton_cuda_format)
if(BATON_WITH_CUDA)
  list(APPEND BATON_EXPORTED_TARGETS baton_cuda)
endif()
install(TARGETS ${BATON_EXPORTED_TARGETS} EXPORT BatonTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT BatonTargets NAMESPACE Baton:: DESTINATION ${BATON_INSTALL_CMAKEDIR})

# Public headers of what is installed: not the compiler's (include/baton/compiler, and the CUDA
# builder's compiler.h and competing_workload.h), and the CUDA ones only with the CUDA backend.
set(BATON_HEADER_EXCLUDES PATTERN compiler EXCLUDE PATTERN compiler.h EXCLUDE
                          PATTERN competing_workload.h EXCLUDE)
if(NOT BATON_WITH_CUDA)
  list(APPEND BATON_HEADER_EXCLUDES PATTERN cuda EXCLUDE)
endif()
install(DIRECTORY include/baton DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} ${BATON_HEADER_EXCLUDES})

if(BATON_BUILD_COMPILER)
  install(TARGETS baton RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

configure_package_config_file(cmake/BatonConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/cmake/BatonConfig.cmake
                              INSTALL_DESTINATION ${BATON_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/BatonConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/BatonConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/BatonConfigVersion.cmake
        DESTINATION ${BATON_INSTALL_CMAKEDIR})
