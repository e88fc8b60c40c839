# conf/package.cmake - CPack: the Debian package (scripts/package.sh runs it).
# Depends: the runtime libraries from dpkg-shlibdeps, plus bubblewrap, which
# `sluice run` executes.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME sluice)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "sluice maintainers <sluice-maintainers@lists.example.org>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "egress policy for programs: sandbox, proxy and checker")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "sluice controls where a program's network traffic may go. One binary holds
four tools sharing one policy engine: 'sluice run' runs a command under
bubblewrap whose only way out is sluice's HTTP and SOCKS5 proxies,
'sluice proxy' is a standalone egress proxy with metrics, health checks,
reload and drain, 'sluice check' explains and tests policy decisions, and
'sluice bridge' relays between Unix sockets and TCP.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "bubblewrap")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "publicsuffix")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# the settings under /etc are the operator's: dpkg keeps their edits
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(SLUICE_CONFFILES ${CMAKE_BINARY_DIR}/deb-control/conffiles)
  file(WRITE ${SLUICE_CONFFILES} "/etc/sluice/settings.json\n")
  set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${SLUICE_CONFFILES})
endif()
include(CPack)
