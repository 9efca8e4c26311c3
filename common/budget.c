/* budget: a deadline and a stop flag for long work (see budget.h). */
#include "common/budget.h"
#include "common/util.h"

#include <stddef.h>

bool budget_over(const struct budget *b)
{
	if (!b)
		return false;
	if (b->stop && atomic_load_explicit(b->stop, memory_order_relaxed))
		return true;
	return b->deadline_ns && util_now_mono_ns() >= b->deadline_ns;
}

int64_t budget_left_ms(const struct budget *b)
{
	int64_t left;

	if (!b || !b->deadline_ns)
		return -1;
	left = b->deadline_ns - util_now_mono_ns();
	if (left <= 0)
		return 0;
	return left / 1000000 + 1;
}
