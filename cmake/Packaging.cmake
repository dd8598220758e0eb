# `cmake --install` and the Debian packages CPack makes (cpack -G DEB in the build
# directory): corral (the command), corrald (the controller) and corral-node (the node
# agent with corral-imp), each with its systemd unit and the docs; corral also carries
# corral-authd, the credential signer of sites without MUNGE. docs/install.md.
include(GNUInstallDirs)

install(TARGETS corral RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT corral)
# What `corral` runs for a command that needs gRPC (src/cli/client/handoff/handoff.cc finds
# it here, relative to itself).
install(TARGETS corral-grpc RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/corral COMPONENT corral)
install(TARGETS corral-authd RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR} COMPONENT corral)
install(FILES packaging/systemd/corral-authd.service DESTINATION lib/systemd/system COMPONENT corral)
install(TARGETS corrald RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR} COMPONENT corrald)
# corral-node finds corral-imp next to itself.
install(TARGETS corral-node corral-imp RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR} COMPONENT corral-node)
# The PMI client libraries go where tasks run, beside (not over) a Slurm libpmi0 or
# libpmi2-0 package: users point their MPI at them (docs/user.md, "MPI").
install(TARGETS corral_pmi corral_pmi2 LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/corral COMPONENT corral-node
        NAMELINK_COMPONENT corral-node)
install(FILES src/node/pmi_client/include/pmi.h src/node/pmi_client/include/pmi2.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/corral
        COMPONENT corral-node)
install(FILES packaging/systemd/corrald.service DESTINATION lib/systemd/system COMPONENT corrald)
install(FILES packaging/systemd/corral-node.service DESTINATION lib/systemd/system COMPONENT corral-node)
install(FILES docs/user.md docs/admin.md DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/corral COMPONENT corral)
install(FILES docs/admin.md docs/install.md DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/corrald COMPONENT corrald)
install(FILES docs/admin.md docs/install.md DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/corral-node COMPONENT corral-node)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME corral)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "corral developers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "corral workload manager for HPC clusters")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL corral corrald corral-node)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_CORRAL_PACKAGE_NAME corral)
set(CPACK_DEBIAN_CORRALD_PACKAGE_NAME corrald)
set(CPACK_DEBIAN_CORRAL-NODE_PACKAGE_NAME corral-node)
set(CPACK_DEBIAN_CORRALD_PACKAGE_RECOMMENDS munge)
set(CPACK_DEBIAN_CORRAL-NODE_PACKAGE_RECOMMENDS munge)
set(CPACK_COMPONENT_CORRAL_DESCRIPTION "corral command line: submit, run, queue, cancel, history")
set(CPACK_COMPONENT_CORRALD_DESCRIPTION "corral controller daemon (corrald)")
set(CPACK_COMPONENT_CORRAL-NODE_DESCRIPTION "corral node agent (corral-node, corral-imp)")
include(CPack)
