# Warnings are on for every target of the project and must stay clean.
add_library(nautilus_warnings INTERFACE)
target_compile_options(nautilus_warnings INTERFACE
  $<$<CXX_COMPILER_ID:GNU,Clang>:-Wall -Wextra -Wpedantic -Wnon-virtual-dtor>
  $<$<CXX_COMPILER_ID:GNU>:-Wshadow=local>)  # clang spells it differently
