# Decoy: what a project's Findccache.cmake for the ccache *compiler cache*
# looks like to find_package(ccache).  find_package(ccache CONFIG) must never
# load it; if it does, the consumer test fails here.
message(FATAL_ERROR "Findccache.cmake (compiler cache) was loaded: use find_package(ccache CONFIG)")
