#===- cmake/OffloadTorch.cmake - LibTorch with one ABI definition --------===#
# offload_find_torch(): find_package(Torch) for the LibTorch-facing targets
# (the importer, the tests that compare with LibTorch). TorchConfig puts
# -D_GLIBCXX_USE_CXX11_ABI=<0|1> on the `torch` target; when the compiler is
# built, LLVM's options (HandleLLVMOptions) already define it for every file,
# so it is taken off torch's interface, after checking that the two agree
# (mixing the ABIs fails only at link or run time). Each file then gets it
# once.
macro(offload_find_torch)
  find_package(Torch REQUIRED)
  if(DEFINED GLIBCXX_USE_CXX11_ABI)
    get_target_property(_offload_torch_opts torch INTERFACE_COMPILE_OPTIONS)
    if(_offload_torch_opts)
      foreach(_o ${_offload_torch_opts})
        if(_o MATCHES "_GLIBCXX_USE_CXX11_ABI=([01])")
          if((GLIBCXX_USE_CXX11_ABI AND NOT CMAKE_MATCH_1 STREQUAL "1") OR
             (NOT GLIBCXX_USE_CXX11_ABI AND NOT CMAKE_MATCH_1 STREQUAL "0"))
            message(FATAL_ERROR "LibTorch is built with ${_o} but LLVM's "
              "options select GLIBCXX_USE_CXX11_ABI=${GLIBCXX_USE_CXX11_ABI}")
          endif()
        endif()
      endforeach()
      list(FILTER _offload_torch_opts EXCLUDE REGEX "_GLIBCXX_USE_CXX11_ABI")
      set_property(TARGET torch PROPERTY INTERFACE_COMPILE_OPTIONS
        "${_offload_torch_opts}")
    endif()
  endif()
endmacro()
