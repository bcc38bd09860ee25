# deploy/: the Kubernetes manifests against DI-orchestrator v0.2.2's CRDs,
# and the OCI image's root file system under chroot (docs/kubernetes.md).
# The CRDs are data outside the tree (never copied in): DI_ORCHESTRATOR_CRDS.
find_program(DL_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(DL_PYTHON3 python3)
set(_dl_crds "")
foreach(_c ${CMAKE_SOURCE_DIR}/../shared/di-orchestrator-v0.2.2 ${CMAKE_SOURCE_DIR}/../../shared/di-orchestrator-v0.2.2)
  if(NOT _dl_crds AND EXISTS ${_c})
    get_filename_component(_dl_crds ${_c} ABSOLUTE)
  endif()
endforeach()
set(DI_ORCHESTRATOR_CRDS "${_dl_crds}" CACHE PATH "DI-orchestrator v0.2.2's CRDs and samples (data; the k8s_manifests test skips without them)")

if(DL_PYTHON3)
  add_test(NAME k8s_manifests
    COMMAND ${DL_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/test_k8s_manifests.py ${CMAKE_SOURCE_DIR}
            "${DI_ORCHESTRATOR_CRDS}")
  set_tests_properties(k8s_manifests PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77 LABELS "deploy")
endif()

# The image is built from this tree's programs: not in sanitizer or
# planted-bug builds, whose programs are not the product.
set(DILEARN_IMAGE_DIR "${CMAKE_SOURCE_DIR}/build-image" CACHE PATH "where ./do image and the image tests keep the image")
if(SANITIZE STREQUAL "" AND NOT PLANT_BUGS AND DL_PYTHON3)
  set(_img ${CMAKE_CURRENT_LIST_DIR}/test_image.sh)
  add_test(NAME image_build COMMAND ${_img} build ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR} ${DILEARN_IMAGE_DIR})
  set_tests_properties(image_build PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77 LABELS "deploy;image"
    FIXTURES_SETUP dl_image RESOURCE_LOCK dl_image_dir)
  foreach(_m content scenarios)
    add_test(NAME image_${_m} COMMAND ${_img} ${_m} ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR} ${DILEARN_IMAGE_DIR})
    set_tests_properties(image_${_m} PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS "deploy;image"
      FIXTURES_REQUIRED dl_image)
  endforeach()
  add_test(NAME image_mock_job
    COMMAND ${DL_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/test_image_job.py ${CMAKE_SOURCE_DIR} ${DILEARN_IMAGE_DIR})
  set_tests_properties(image_mock_job PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS "deploy;image"
    FIXTURES_REQUIRED dl_image)
endif()
