/* reference_definition.h: the frozen scalar reference (reference_definition.c),
 * for tests that check the live reference backend against it. */
#ifndef GT_TEST_REFERENCE_DEFINITION_H
#define GT_TEST_REFERENCE_DEFINITION_H

#include "gt/backend.h"

/* A backend computing the definition; close with gt_backend_close. NULL when
 * out of memory. */
gt_backend *reference_definition_open(void);

#endif
