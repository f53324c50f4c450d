# The CUDA backend (src/backends/cuda), built as its own libraries; libcinder links no CUDA
# library. The root CMakeLists.txt includes this file at top level; nothing else there knows
# about CUDA.
#
#   -DCINDER_CUDA=AUTO   (default) build the backend when a CUDA compiler (nvcc) is found
#   -DCINDER_CUDA=ON     require it: configuring fails without nvcc
#   -DCINDER_CUDA=OFF    never build it
#   -DCINDER_CUDNN=OFF   do not use cuDNN even when found (convolutions then use cinder's own
#                        im2col + cuBLAS kernels, as they do when cuDNN is missing)
#   -DCUDNN_ROOT=<dir>   where to look for cuDNN first (cudnn.h, libcudnn)
#
# What it builds:
# - libcinder_cuda.so (target cinder_cuda), a backend module that libcinder loads at run time the
#   first time a CUDA device is asked for (include/cinder/backend.h); it is written next to
#   libcinder.so and installed beside it. It exports cn_backend_module_init alone and reaches
#   cinder only through the services handed to that function (host_module.c).
# - libcinder_cuda.a (target cinder_cuda_static, exported as cinder::cuda_static), the same code
#   for programs that link cinder statically and register the backend themselves
#   (cn_backend_add_module(cn_cuda_backend_module), include/cinder/cuda.h).
# - sm_90 (Hopper) machine code plus compute_90 PTX, unless the caller set
#   CMAKE_CUDA_ARCHITECTURES (or CUDAARCHS); one architecture keeps the build short.
# The directory's C flags (warnings, -fsanitize=...) are kept away from nvcc, which does not take
# them (host code compiled by nvcc is not instrumented, and links fine with the sanitizers).
include_guard(GLOBAL)

set(CINDER_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO (when nvcc is found), ON or OFF")
set_property(CACHE CINDER_CUDA PROPERTY STRINGS AUTO ON OFF)
option(CINDER_CUDNN "Use cuDNN for convolutions in the CUDA backend when it is found" ON)

string(TOUPPER "${CINDER_CUDA}" _cinder_cuda_mode)
if(_cinder_cuda_mode STREQUAL "AUTO")
elseif(_cinder_cuda_mode MATCHES "^(ON|TRUE|YES|1|Y)$")
  set(_cinder_cuda_mode ON)
elseif(_cinder_cuda_mode MATCHES "^(OFF|FALSE|NO|0|N)$")
  set(_cinder_cuda_mode OFF)
else()
  message(FATAL_ERROR "CINDER_CUDA='${CINDER_CUDA}': use AUTO, ON or OFF")
endif()

set(CINDER_HAVE_CUDA OFF)
set(CINDER_HAVE_CUDNN OFF)
if(NOT _cinder_cuda_mode STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER)
    include(CheckLanguage)
    check_language(CUDA)
  endif()
  if(CMAKE_CUDA_COMPILER)
    if(NOT CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
      set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual")
    endif()
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_EXTENSIONS OFF)
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared) # the same libcudart as CUDA::cudart below
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(CINDER_HAVE_CUDA ON)
  elseif(_cinder_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "CINDER_CUDA=ON but no CUDA compiler was found: install the CUDA toolkit "
                        "and put nvcc on PATH (or pass -DCMAKE_CUDA_COMPILER=/path/to/nvcc), or "
                        "configure with -DCINDER_CUDA=AUTO or OFF")
  endif()
endif()

if(CINDER_HAVE_CUDA AND CINDER_CUDNN)
  find_path(CINDER_CUDNN_INCLUDE_DIR cudnn.h
    HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}
    PATH_SUFFIXES include)
  # pip's nvidia-cudnn wheels ship only the versioned name (CUDNN_ROOT=<site-packages>/nvidia/cudnn)
  find_library(CINDER_CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 libcudnn.so.8
    HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
    PATH_SUFFIXES lib64 lib lib/x64)
  set(_cinder_cudnn_major 0)
  foreach(_h cudnn_version.h cudnn.h)
    if(CINDER_CUDNN_INCLUDE_DIR AND EXISTS "${CINDER_CUDNN_INCLUDE_DIR}/${_h}"
       AND _cinder_cudnn_major EQUAL 0)
      file(STRINGS "${CINDER_CUDNN_INCLUDE_DIR}/${_h}" _line REGEX "^#define CUDNN_MAJOR +[0-9]+")
      if(_line)
        string(REGEX REPLACE "^#define CUDNN_MAJOR +([0-9]+).*" "\\1" _cinder_cudnn_major "${_line}")
      endif()
    endif()
  endforeach()
  if(CINDER_CUDNN_INCLUDE_DIR AND CINDER_CUDNN_LIBRARY AND _cinder_cudnn_major GREATER_EQUAL 8)
    set(CINDER_HAVE_CUDNN ON)
  endif()
endif()

if(CINDER_HAVE_CUDA)
  set(_cuda_dir ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/cuda)
  file(GLOB CINDER_CUDA_SOURCES CONFIGURE_DEPENDS ${_cuda_dir}/*.c ${_cuda_dir}/*.cu)
  list(REMOVE_ITEM CINDER_CUDA_SOURCES ${_cuda_dir}/host_module.c ${_cuda_dir}/host_static.c)
  # the random generators must round every operation as written (core/philox.h)
  set_source_files_properties(${_cuda_dir}/copy.cu PROPERTIES COMPILE_OPTIONS "--fmad=false")

  # The directory's compile options so far are for the C compiler; hide them from nvcc.
  get_directory_property(_cinder_opts COMPILE_OPTIONS)
  set(_cinder_wrapped "")
  foreach(_opt IN LISTS _cinder_opts)
    if(_opt MATCHES "^\\$<")
      list(APPEND _cinder_wrapped "${_opt}")
    else()
      list(APPEND _cinder_wrapped "$<$<NOT:$<COMPILE_LANGUAGE:CUDA>>:${_opt}>")
    endif()
  endforeach()
  set_directory_properties(PROPERTIES COMPILE_OPTIONS "${_cinder_wrapped}")

  set(_cinder_cuda_libs CUDA::cudart CUDA::cublas CUDA::cufft)
  if(CINDER_HAVE_CUDNN)
    list(APPEND _cinder_cuda_libs ${CINDER_CUDNN_LIBRARY})
  endif()

  # One set of objects for the module and the archive.
  add_library(cinder_cuda_objects OBJECT ${CINDER_CUDA_SOURCES})
  target_include_directories(cinder_cuda_objects PRIVATE
    ${CMAKE_CURRENT_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_link_libraries(cinder_cuda_objects PRIVATE CUDA::cudart CUDA::cublas CUDA::cufft) # headers
  target_compile_options(cinder_cuda_objects PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall>)
  set_target_properties(cinder_cuda_objects PROPERTIES POSITION_INDEPENDENT_CODE ON
    C_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden)
  if(CINDER_HAVE_CUDNN)
    target_include_directories(cinder_cuda_objects PRIVATE ${CINDER_CUDNN_INCLUDE_DIR})
    target_compile_definitions(cinder_cuda_objects PRIVATE CINDER_HAVE_CUDNN)
  endif()

  add_library(cinder_cuda MODULE $<TARGET_OBJECTS:cinder_cuda_objects> ${_cuda_dir}/host_module.c)
  target_include_directories(cinder_cuda PRIVATE
    ${CMAKE_CURRENT_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_link_libraries(cinder_cuda PRIVATE ${_cinder_cuda_libs})
  set_target_properties(cinder_cuda PROPERTIES OUTPUT_NAME cinder_cuda PREFIX lib
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR} C_VISIBILITY_PRESET hidden
    LINK_DEPENDS ${_cuda_dir}/module.map)
  target_link_options(cinder_cuda PRIVATE -Wl,--version-script=${_cuda_dir}/module.map)

  add_library(cinder_cuda_static STATIC $<TARGET_OBJECTS:cinder_cuda_objects>
    ${_cuda_dir}/host_static.c)
  target_include_directories(cinder_cuda_static PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_include_directories(cinder_cuda_static PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>)
  target_link_libraries(cinder_cuda_static PUBLIC ${_cinder_cuda_libs})
  set_target_properties(cinder_cuda_static PROPERTIES OUTPUT_NAME cinder_cuda)

  if(CINDER_HAVE_CUDNN)
    set(_cinder_cudnn_note "cuDNN ${_cinder_cudnn_major} (${CINDER_CUDNN_LIBRARY})")
  elseif(CINDER_CUDNN)
    set(_cinder_cudnn_note "no cuDNN found (own convolution kernels; set CUDNN_ROOT to use one)")
  else()
    set(_cinder_cudnn_note "cuDNN off (own convolution kernels)")
  endif()
  message(STATUS "cinder: CUDA backend module on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
                 "architectures ${CMAKE_CUDA_ARCHITECTURES}, ${_cinder_cudnn_note})")
else()
  message(STATUS "cinder: CUDA backend off (CINDER_CUDA=${CINDER_CUDA})")
endif()
