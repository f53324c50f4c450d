# The distributed layer (src/distributed, include/cinder/distributed.h): data parallelism over MPI
# for CPU tensors and NCCL for CUDA tensors. A library of its own, so that libcinder links no MPI:
# libcinder_distributed.so over libcinder.so (cinder_distributed_shared, exported as
# cinder::distributed) and libcinder_distributed.a over libcinder.a (cinder_distributed, exported
# as cinder::distributed_static; cinder's own program and tests link it).
#
#   -DCINDER_DISTRIBUTED=AUTO  (default) build it when MPI (MPI_C) is found
#   -DCINDER_DISTRIBUTED=ON    require MPI: configuring fails without it
#   -DCINDER_DISTRIBUTED=OFF   never build it
#
# The NCCL engine is compiled in when the CUDA backend is (cmake/CinderCuda.cmake found the
# toolkit) and nccl.h and libnccl are found (in the toolkit, or under NCCL_ROOT); it is plain C
# over the CUDA runtime's and NCCL's C APIs, so it needs no nvcc.
include_guard(GLOBAL)

set(CINDER_DISTRIBUTED AUTO CACHE STRING
  "Build the distributed layer: AUTO (when MPI is found), ON or OFF")
set_property(CACHE CINDER_DISTRIBUTED PROPERTY STRINGS AUTO ON OFF)

set(CINDER_HAVE_MPI OFF)
set(CINDER_HAVE_NCCL OFF)
string(TOUPPER "${CINDER_DISTRIBUTED}" _cinder_dist_mode)
if(NOT _cinder_dist_mode MATCHES "^(OFF|FALSE|NO|0|N)$")
  find_package(MPI COMPONENTS C)
  if(MPI_C_FOUND)
    set(CINDER_HAVE_MPI ON)
  elseif(_cinder_dist_mode MATCHES "^(ON|TRUE|YES|1|Y)$")
    message(FATAL_ERROR "CINDER_DISTRIBUTED=ON but MPI was not found: install it with "
                        "`apt-get install libopenmpi-dev openmpi-bin` (scripts/deps.sh does), or "
                        "configure with -DCINDER_DISTRIBUTED=AUTO or OFF")
  endif()
endif()

if(CINDER_HAVE_MPI)
  file(GLOB CINDER_DIST_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/distributed/*.c)
  list(REMOVE_ITEM CINDER_DIST_SOURCES ${PROJECT_SOURCE_DIR}/src/distributed/engine_nccl.c)
  if(CINDER_HAVE_CUDA)
    find_path(CINDER_NCCL_INCLUDE_DIR nccl.h
      HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}
      PATH_SUFFIXES include)
    find_library(CINDER_NCCL_LIBRARY NAMES nccl libnccl.so.2
      HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
      PATH_SUFFIXES lib lib64)
    if(CINDER_NCCL_INCLUDE_DIR AND CINDER_NCCL_LIBRARY)
      set(CINDER_HAVE_NCCL ON)
      list(APPEND CINDER_DIST_SOURCES ${PROJECT_SOURCE_DIR}/src/distributed/engine_nccl.c)
    endif()
  endif()
  # One set of objects, two libraries, as libcinder: libcinder_distributed.a over libcinder.a,
  # and libcinder_distributed.so over libcinder.so. The layer calls only libcinder's public API
  # (dist_internal.h), so the shared library needs nothing that libcinder.so does not export, and
  # it exports the CN_API calls of cinder/distributed.h alone (hidden visibility). Its header
  # includes no MPI header: a program using the shared library needs MPI only at run time.
  add_library(cinder_distributed_objects OBJECT ${CINDER_DIST_SOURCES})
  target_include_directories(cinder_distributed_objects PRIVATE ${PROJECT_SOURCE_DIR}/src
    ${PROJECT_SOURCE_DIR}/include)
  set_target_properties(cinder_distributed_objects PROPERTIES C_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_link_libraries(cinder_distributed_objects PRIVATE MPI::MPI_C)
  add_library(cinder_distributed STATIC $<TARGET_OBJECTS:cinder_distributed_objects>)
  target_link_libraries(cinder_distributed PUBLIC cinder_static MPI::MPI_C)
  add_library(cinder_distributed_shared SHARED $<TARGET_OBJECTS:cinder_distributed_objects>)
  set_target_properties(cinder_distributed_shared PROPERTIES OUTPUT_NAME cinder_distributed
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
  target_link_libraries(cinder_distributed_shared PUBLIC cinder_shared PRIVATE MPI::MPI_C)
  if(CINDER_HAVE_NCCL)
    target_include_directories(cinder_distributed_objects PRIVATE ${CINDER_NCCL_INCLUDE_DIR})
    target_compile_definitions(cinder_distributed_objects PRIVATE CINDER_HAVE_NCCL)
    target_link_libraries(cinder_distributed_objects PRIVATE CUDA::cudart)
    target_link_libraries(cinder_distributed PUBLIC ${CINDER_NCCL_LIBRARY} CUDA::cudart)
    target_link_libraries(cinder_distributed_shared PRIVATE ${CINDER_NCCL_LIBRARY} CUDA::cudart)
    set(_cinder_nccl_note "NCCL engine on (${CINDER_NCCL_LIBRARY})")
  elseif(CINDER_HAVE_CUDA)
    set(_cinder_nccl_note "no NCCL found (set NCCL_ROOT)")
  else()
    set(_cinder_nccl_note "no NCCL engine (CUDA backend off)")
  endif()
  # as cinder::cinder and cinder::cinder_static
  add_library(cinder::distributed ALIAS cinder_distributed_shared)
  add_library(cinder::distributed_static ALIAS cinder_distributed)
  set_target_properties(cinder_distributed_shared PROPERTIES EXPORT_NAME distributed)
  set_target_properties(cinder_distributed PROPERTIES EXPORT_NAME distributed_static)
  message(STATUS "cinder: distributed layer on (MPI ${MPI_C_VERSION}, ${_cinder_nccl_note})")
else()
  message(STATUS "cinder: distributed layer off (CINDER_DISTRIBUTED=${CINDER_DISTRIBUTED}, "
                 "MPI found: ${MPI_C_FOUND})")
endif()
