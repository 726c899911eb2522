# Shared settings for every target ratchet builds: warnings as errors on our
# own code, sanitizer flags for the asan/tsan presets, and one helper per kind
# of target so each part of the engine is declared in a few lines.

add_library(ratchet_build_flags INTERFACE)
target_compile_options(ratchet_build_flags INTERFACE
  -Wall -Wextra -Wpedantic -Werror -Wshadow -Wnon-virtual-dtor
  -Woverloaded-virtual -Wcast-align -Wformat=2 -Wimplicit-fallthrough)

if(RATCHET_SANITIZE STREQUAL "address")
  set(_ratchet_san -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
elseif(RATCHET_SANITIZE STREQUAL "thread")
  set(_ratchet_san -fsanitize=thread -fno-omit-frame-pointer)
elseif(NOT RATCHET_SANITIZE STREQUAL "")
  message(FATAL_ERROR "RATCHET_SANITIZE must be empty, 'address' or 'thread', not '${RATCHET_SANITIZE}'")
endif()
if(_ratchet_san)
  target_compile_options(ratchet_build_flags INTERFACE ${_ratchet_san})
  target_link_options(ratchet_build_flags INTERFACE ${_ratchet_san})
endif()

# ratchet_component(NAME SOURCES ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...])
# One part of the engine (store, limit, http, ...): a static, position
# independent library that ends up inside libratchet.so. Internal headers are
# included relative to engine/, e.g. "store/store.hpp".
function(ratchet_component name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(ratchet_${name} STATIC ${ARG_SOURCES})
  target_include_directories(ratchet_${name} PUBLIC
    "${PROJECT_SOURCE_DIR}/engine"
    "${PROJECT_SOURCE_DIR}/include"
    "${PROJECT_BINARY_DIR}/include")
  target_link_libraries(ratchet_${name} PUBLIC ratchet_build_flags ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  target_compile_definitions(ratchet_${name} PUBLIC RATCHET_BUILDING_LIBRARY)
endfunction()

# ratchet_plugin(NAME SOURCES ... [DEPS ...])
# A plugin: a MODULE library named NAME.so in the build tree's plugin folder.
function(ratchet_plugin name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} MODULE ${ARG_SOURCES})
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    LIBRARY_OUTPUT_DIRECTORY "${RATCHET_PLUGIN_DIR}")
  target_link_libraries(${name} PRIVATE ratchet_build_flags ratchet_plugin_sdk ${ARG_DEPS})
endfunction()

# ratchet_test(NAME SOURCES ... [DEPS ...] [TEST_FILTER gtest-filter] [PROPERTIES ...])
# A GoogleTest binary whose tests CTest discovers one by one (those the
# filter selects, when given).
function(ratchet_test name)
  cmake_parse_arguments(ARG "" "TEST_FILTER" "SOURCES;DEPS;PROPERTIES" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ratchet_build_flags GTest::gtest GTest::gtest_main ${ARG_DEPS})
  # ratchet_test_paths.hpp: RATCHET_PLUGIN_DIR, RATCHET_SOURCE_DIR, RATCHET_BINARY_DIR;
  # tests/support: helpers every test folder may use.
  target_include_directories(${name} PRIVATE "${PROJECT_BINARY_DIR}/test_include" "${PROJECT_SOURCE_DIR}/tests/support")
  set(filter)
  if(ARG_TEST_FILTER)
    set(filter TEST_FILTER "${ARG_TEST_FILTER}")
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 ${filter} PROPERTIES ${ARG_PROPERTIES})
endfunction()
