/* SPSC ring setup; push and pop are inline in spsc.h. */
#include <errno.h>

#include "common/spsc.h"

int km_spsc_init(struct km_spsc *q, void **slots, uint32_t capacity)
{
	if (capacity < 2 || (capacity & (capacity - 1)) != 0)
		return -EINVAL;
	atomic_init(&q->head, 0);
	atomic_init(&q->tail, 0);
	q->mask = capacity - 1;
	q->slots = slots;
	return 0;
}
