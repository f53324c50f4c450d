# Install rules: headers, libcinder.so.<major> and libcinder.a, the backend modules, the cinder
# program, cinder-extgen, a CMake package (find_package(cinder): cinder::cinder,
# cinder::cinder_static, cinder::extgen, cinder_add_extension) and cinder.pc for pkg-config.
include_guard(GLOBAL)

set(CINDER_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/cinder)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/cinder
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")

install(TARGETS cinder_shared cinder_static cinder-extgen EXPORT cinderTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# Backend modules go next to libcinder.so, where it looks for them first. The static CUDA archive
# is a package component of its own, since its users need the CUDA toolkit.
if(TARGET cinder_cuda)
  install(TARGETS cinder_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(TARGETS cinder_cuda_static EXPORT cinderCudaTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT cinderCudaTargets NAMESPACE cinder:: DESTINATION ${CINDER_CMAKE_DIR})
endif()
# The distributed layer is a component of its own: libcinder_distributed.so.<major>
# (cinder::distributed, over libcinder.so) and libcinder_distributed.a (cinder::distributed_static,
# over libcinder.a); its users need MPI (and, when it has the NCCL engine, the CUDA toolkit), and
# pkg-config's cinder-distributed.
if(TARGET cinder_distributed)
  install(TARGETS cinder_distributed cinder_distributed_shared EXPORT cinderDistributedTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT cinderDistributedTargets NAMESPACE cinder:: DESTINATION ${CINDER_CMAKE_DIR})
endif()
install(TARGETS cinder_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(EXPORT cinderTargets NAMESPACE cinder:: DESTINATION ${CINDER_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/cinderConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cinderConfig.cmake INSTALL_DESTINATION ${CINDER_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cinderConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cinderConfig.cmake ${PROJECT_BINARY_DIR}/cinderConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/CinderExtension.cmake DESTINATION ${CINDER_CMAKE_DIR})

# pkg-config: `pkg-config --cflags --libs cinder` for the shared library, `--static` adds what
# libcinder.a needs.
# Relocatable: the prefix is found from the .pc file's own place (pkg-config's ${pcfiledir}), so
# `cmake --install --prefix P` and a copied tree both work.
file(RELATIVE_PATH CINDER_PC_UP "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" CINDER_PC_UP "${CINDER_PC_UP}")
set(CINDER_PC_PREFIX "\${pcfiledir}/${CINDER_PC_UP}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/cinder.pc.in ${PROJECT_BINARY_DIR}/cinder.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/cinder.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(TARGET cinder_distributed)
  # MPI's libraries, for --static (the shared library has them as its own dependencies)
  set(CINDER_PC_MPI_LIBS "")
  foreach(lib ${MPI_C_LIBRARIES})
    string(APPEND CINDER_PC_MPI_LIBS " ${lib}")
  endforeach()
  configure_file(${PROJECT_SOURCE_DIR}/cmake/cinder-distributed.pc.in
    ${PROJECT_BINARY_DIR}/cinder-distributed.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/cinder-distributed.pc
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()

install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/LICENSE-MIT
  ${PROJECT_SOURCE_DIR}/LICENSE-APACHE DESTINATION ${CMAKE_INSTALL_DOCDIR})
