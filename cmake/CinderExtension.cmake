# cinder_add_extension(<target> <decl> [SOURCES <file>...] [CUDA_SOURCES <file>...])
#
# Builds a cinder extension as a static library <target>: at build time cinder-extgen turns the
# declaration file <decl> (docs/extensions.md) into <stem>.h and <stem>.c, where <stem> is the
# file's name up to its first dot (ops.cnext -> ops.h). The library holds the generated source
# plus SOURCES (your shape functions, kernels and backwards, which you may also add later with
# target_sources). Linking <target> gives its users the generated header's directory and cinder.
#
#     cinder_add_extension(fused fused.cnext SOURCES fused_kernels.c)
#     target_link_libraries(train PRIVATE fused)     # then: #include "fused.h"
#
# CUDA_SOURCES hold the ops' CUDA kernels (<ext>_<op>_cuda, for ops that list `cuda` among their
# backends). They are built when the project has enabled the CUDA language (cinder's own build
# does when it finds nvcc), with CINDER_HAVE_CUDA defined so that the generated source registers
# them; without CUDA they are left out, and such an op called on a GPU tensor reports that it has
# no CUDA kernel. They link CUDA's runtime statically (CUDA::cudart_static), so a program using
# the extension still starts where CUDA's libraries are missing, as libcinder does.
#
# A declaration error fails the build with `<decl>:<line>: error: <message>`.
include_guard(GLOBAL)

function(cinder_add_extension target decl)
  cmake_parse_arguments(PARSE_ARGV 2 ARG "" "" "SOURCES;CUDA_SOURCES")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "cinder_add_extension(${target} ...): unexpected arguments "
                        "${ARG_UNPARSED_ARGUMENTS} (usage: <target> <decl> [SOURCES files...] "
                        "[CUDA_SOURCES files...])")
  endif()
  get_filename_component(decl_path ${decl} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
  if(NOT EXISTS ${decl_path})
    message(FATAL_ERROR "cinder_add_extension(${target}): no declaration file ${decl_path}")
  endif()
  get_filename_component(stem ${decl_path} NAME_WE)
  set(out_dir ${CMAKE_CURRENT_BINARY_DIR}/${target}_generated)
  set(header ${out_dir}/${stem}.h)
  set(source ${out_dir}/${stem}.c)

  if(TARGET cinder-extgen)          # in cinder's own tree, or cinder as a subproject
    set(extgen $<TARGET_FILE:cinder-extgen>)
    set(extgen_dep cinder-extgen)
  elseif(TARGET cinder::extgen)     # an installed cinder (find_package)
    set(extgen $<TARGET_FILE:cinder::extgen>)
    set(extgen_dep cinder::extgen)
  else()
    find_program(CINDER_EXTGEN cinder-extgen REQUIRED)
    set(extgen ${CINDER_EXTGEN})
    set(extgen_dep ${CINDER_EXTGEN})
  endif()

  file(MAKE_DIRECTORY ${out_dir})
  add_custom_command(
    OUTPUT ${header} ${source}
    COMMAND ${extgen} ${decl_path} --header ${header} --source ${source}
    DEPENDS ${decl_path} ${extgen_dep}
    COMMENT "cinder-extgen: ${stem}.h and ${stem}.c from ${decl}"
    VERBATIM)

  find_package(Threads REQUIRED)
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  set(cuda_sources "")
  if(ARG_CUDA_SOURCES AND "CUDA" IN_LIST languages)
    set(cuda_sources ${ARG_CUDA_SOURCES})
  endif()
  add_library(${target} STATIC ${source} ${header} ${ARG_SOURCES} ${cuda_sources})
  if(cuda_sources)
    find_package(CUDAToolkit REQUIRED)
    target_compile_definitions(${target} PRIVATE CINDER_HAVE_CUDA)
    target_link_libraries(${target} PUBLIC CUDA::cudart_static)
  endif()
  target_include_directories(${target} PUBLIC ${out_dir})
  # cinder's own tree links the static library (its programs do); users get cinder::cinder.
  if(TARGET cinder_static AND PROJECT_NAME STREQUAL "cinder")
    target_link_libraries(${target} PUBLIC cinder_static)
  else()
    target_link_libraries(${target} PUBLIC cinder::cinder)
  endif()
  target_link_libraries(${target} PUBLIC Threads::Threads)
endfunction()
