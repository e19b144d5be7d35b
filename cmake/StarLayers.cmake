# The one-way dependency rule of docs/ARCHITECTURE.md, checked at configure time:
#
#   core <- kube, report <- shim, agent, operator <- cli
#
# Every library target belongs to the component its name starts with; a component may
# link only the components listed for it below (directly or through any other target).
# Configuring fails, naming the path of targets, when one links a component above or
# beside it (the agent linking the operator, the operator linking the shim, ...).

set(STAR_LAYER_PREFIXES
  star_core core   star_yaml yaml   star_kube kube   star_report report   star_shim shim
  star_agent agent   star_operator operator   star_local cli   star_cli cli)
set(STAR_LAYER_ALLOWED_core "")
set(STAR_LAYER_ALLOWED_yaml core)
set(STAR_LAYER_ALLOWED_kube core yaml)
set(STAR_LAYER_ALLOWED_report core)
set(STAR_LAYER_ALLOWED_shim core report)
set(STAR_LAYER_ALLOWED_agent core yaml kube)
set(STAR_LAYER_ALLOWED_operator core yaml kube report)
set(STAR_LAYER_ALLOWED_cli core yaml kube report shim agent operator)
# Targets some targets must not reach even where their components may: `star local`
# runs the operator's control loop, never its Kubernetes half.
set(STAR_LAYER_DENY_star_local star_operator_reconciler star_kube)

# The component of a target name, or "" for targets outside the house (libraries, tests).
function(star_layer_of target out)
  set(_layer "")
  set(_pairs ${STAR_LAYER_PREFIXES})
  while(_pairs)
    list(POP_FRONT _pairs _prefix _name)
    if(target STREQUAL _prefix OR target MATCHES "^${_prefix}_")
      set(_layer ${_name})
      break()
    endif()
  endwhile()
  if(target MATCHES "_test$|^star_test_")
    set(_layer "")  # tests may link anything
  endif()
  set(${out} "${_layer}" PARENT_SCOPE)
endfunction()

# The project targets `target` links, directly (generator expressions unwrapped).
function(star_layer_direct_links target out)
  get_target_property(_type ${target} TYPE)
  set(_links "")
  if(NOT _type STREQUAL "INTERFACE_LIBRARY")
    get_target_property(_l ${target} LINK_LIBRARIES)
    if(_l)
      list(APPEND _links ${_l})
    endif()
  endif()
  get_target_property(_il ${target} INTERFACE_LINK_LIBRARIES)
  if(_il)
    list(APPEND _links ${_il})
  endif()
  set(_result "")
  foreach(_dep IN LISTS _links)
    string(REGEX REPLACE "^\\$<[A-Z_]+:(.*)>$" "\\1" _dep "${_dep}")
    if(TARGET ${_dep})
      get_target_property(_aliased ${_dep} ALIASED_TARGET)
      if(_aliased)
        set(_dep ${_aliased})
      endif()
      list(APPEND _result ${_dep})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _result)
  set(${out} "${_result}" PARENT_SCOPE)
endfunction()

# Fails configuring when `root`, a target of `component`, reaches (through `target`) a
# component that `component` may not link, or a target on root's deny list. `path` is
# how it got here.
function(star_layer_walk component root target path)
  star_layer_direct_links(${target} _deps)
  foreach(_dep IN LISTS _deps)
    get_property(_seen GLOBAL PROPERTY STAR_LAYER_SEEN_${root}_${_dep})
    if(_seen)
      continue()
    endif()
    set_property(GLOBAL PROPERTY STAR_LAYER_SEEN_${root}_${_dep} TRUE)
    star_layer_of(${_dep} _dep_layer)
    if(_dep IN_LIST STAR_LAYER_DENY_${root})
      message(FATAL_ERROR "Layering: ${path} -> ${_dep}: ${root} must not link ${_dep}")
    endif()
    if(_dep_layer AND NOT _dep_layer STREQUAL component AND
       NOT _dep_layer IN_LIST STAR_LAYER_ALLOWED_${component})
      message(FATAL_ERROR "Layering: ${path} -> ${_dep}: ${component} must not link "
                          "${_dep_layer} (docs/ARCHITECTURE.md: core <- kube, report <- shim, "
                          "agent, operator <- cli)")
    endif()
    star_layer_walk(${component} ${root} ${_dep} "${path} -> ${_dep}")
  endforeach()
endfunction()

# Checks every library target defined under `dirs` (and their subdirectories).
function(star_check_layers)
  set(_dirs ${ARGN})
  set(_targets "")
  while(_dirs)
    list(POP_FRONT _dirs _dir)
    get_property(_t DIRECTORY ${_dir} PROPERTY BUILDSYSTEM_TARGETS)
    get_property(_sub DIRECTORY ${_dir} PROPERTY SUBDIRECTORIES)
    list(APPEND _targets ${_t})
    list(APPEND _dirs ${_sub})
  endwhile()
  set(_checked 0)
  foreach(_target IN LISTS _targets)
    star_layer_of(${_target} _layer)
    get_target_property(_type ${_target} TYPE)
    if(_layer AND _type MATCHES "LIBRARY")
      star_layer_walk(${_layer} ${_target} ${_target} ${_target})
      math(EXPR _checked "${_checked} + 1")
    endif()
  endforeach()
  message(STATUS "STAR: layering checked on ${_checked} library targets")
endfunction()
