/*
 * cunit_main.h - the one way our CUnit programs run and exit.
 *
 * CU_basic_run_tests() returns CUE_SUCCESS even when assertions failed, so
 * the exit status comes from CU_get_number_of_failures() (CONTRIBUTING.md,
 * Tests).
 * Usage:
 *     static const struct rx_test tests[] = {{"name", fn}, ..., {NULL, NULL}};
 *     int main(void) { return rx_run_suite("window", tests); }
 */
#ifndef RESILIX_TEST_CUNIT_MAIN_H
#define RESILIX_TEST_CUNIT_MAIN_H

#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <stdio.h>

struct rx_test {
	const char *name;
	void (*fn)(void);
};

static inline int rx_run_suite(const char *suite_name,
                               const struct rx_test *tests)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	CU_pSuite suite = CU_add_suite(suite_name, NULL, NULL);
	if (suite == NULL)
		return 2;
	unsigned n = 0;
	for (const struct rx_test *t = tests; t->name != NULL; t++, n++)
		if (CU_add_test(suite, t->name, t->fn) == NULL)
			return 2;
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failures = CU_get_number_of_failures();
	unsigned ran = CU_get_number_of_tests_run();
	unsigned failed_tests = CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	/* A program that registered tests but ran none has failed too. */
	if (ran != n)
		return 1;
	printf("%u passed, %u failed\n", ran - failed_tests, failed_tests);
	return failures == 0 ? 0 : 1;
}

#endif
