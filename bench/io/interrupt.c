/* interrupt.c — see interrupt.h. */
#include "interrupt.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t first_signal;

/* First signal: remember it. Second: the default action, at once. */
static void on_signal(int sig)
{
	if (!first_signal) {
		first_signal = sig;
		return;
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

void interrupt_install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	/* no SA_RESTART: the first signal ends a blocked call (EINTR) */
	sa.sa_flags = 0;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

int interrupt_signal(void)
{
	return first_signal;
}

const char *interrupt_name(void)
{
	return first_signal == SIGTERM ? "SIGTERM" : "SIGINT";
}

int interrupt_exit_status(void)
{
	return 128 + (first_signal ? first_signal : SIGINT);
}
