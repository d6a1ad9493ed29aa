#ifndef KM_TESTS_UNIT_SPSC_SUPPORT_H
#define KM_TESTS_UNIT_SPSC_SUPPORT_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
int km_test_spsc_init(uint32_t capacity);
/* Push until full, then pop all: *pushed, *fifo (1 if order kept). */
int km_test_spsc_fill(uint32_t capacity, uint32_t *pushed, int *fifo);
/* n items through a ring of capacity between two threads, in order:
 * 0, -2 on a reordered/lost item. */
int km_test_spsc_threads(uint64_t n, uint32_t capacity, uint64_t *full_seen);
#ifdef __cplusplus
}
#endif
#endif
