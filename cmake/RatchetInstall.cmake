# Installs libratchet, its public headers and a CMake package, so a host does
#   find_package(ratchet CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE ratchet::ratchet)
include(CMakePackageConfigHelpers)

install(TARGETS ratchet ratchet_plugin_sdk EXPORT ratchetTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/ratchet DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY "${PROJECT_BINARY_DIR}/include/ratchet" DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT ratchetTargets NAMESPACE ratchet:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ratchet)

configure_package_config_file(cmake/ratchetConfig.cmake.in
  "${PROJECT_BINARY_DIR}/ratchetConfig.cmake"
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ratchet)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/ratchetConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/ratchetConfig.cmake" "${PROJECT_BINARY_DIR}/ratchetConfigVersion.cmake"
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ratchet)
