/*
 * genfleet: a synthetic fleet of trace streams with known performance bugs,
 * for `make demo`, `make bench` and the end-to-end mining tests.
 *
 * It models H hosts running a few C++ services (default "checkout" and
 * "search"), writes N trace streams as NDJSON (wire format v1, one stream per
 * line) and, with --truth, a JSON document saying which bugs were injected
 * where and at what cost. docs/demo-fleet.md describes the model.
 *
 * Setup builds, per app, a code base (a call graph of generated C++ and C
 * functions over real library call chains and kernel paths) and pools of
 * distinct call stacks drawn from it, plus the stacks of every injected bug.
 * Each stream is then one bad-performance episode assembled from those pools:
 * built, written and forgotten before the next one (one arena, reused).
 *
 * Everything comes from --seed through xoshiro256** generators seeded with
 * splitmix64 (never rand()), one per purpose and stream, so a seed always
 * gives the same bytes.
 */
#include "common/arena.h"
#include "common/buf.h"
#include "common/intern.h"
#include "common/util.h"
#include "common/wire.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define US 1000LL
#define MS 1000000LL

#define MAX_APPS 8
#define MAX_ROUTES 4
#define MAX_CALLERS 2
#define MAX_BUGS 64
#define MAX_HITS 3          /* bugs injected into one stream */
#define MAX_THREADS 24
#define MAX_SEQ 500         /* frames of a stack under construction */
#define MAX_DEPTH_T 400     /* largest target depth; the i686 rewrite adds a few frames */
#define WS_MAX 256
#define REGRESSION_DB_POOL 16   /* --regression-conf: the configuration the regression needs */

/* ---------------------------------------------------------------------------
 * Small helpers. A test tool: running out of memory ends the run.
 */

__attribute__((noreturn, format(printf, 1, 2)))
static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("genfleet: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (!q)
		die("out of memory");
	return q;
}

static void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz ? sz : 1);

	if (!p)
		die("out of memory");
	return p;
}

#define GROW(arr, n, cap)                                                     \
	do {                                                                  \
		if ((n) >= (cap)) {                                           \
			(cap) = (cap) ? (cap) * 2 : 16;                       \
			(arr) = xrealloc((arr), (cap) * sizeof(*(arr)));      \
		}                                                             \
	} while (0)

static int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* ---------------------------------------------------------------------------
 * Randomness: xoshiro256** seeded through splitmix64, one generator per
 * (seed, purpose, index) so that streams do not depend on each other's draws.
 */

struct rng {
	uint64_t s[4];
};

enum { RNG_SETUP = 1, RNG_HOSTS, RNG_PICK, RNG_BUILD, RNG_APP, RNG_BUG };

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void rng_init(struct rng *r, uint64_t seed, uint64_t purpose, uint64_t index)
{
	uint64_t x = seed;

	x = splitmix64(&x) ^ (purpose << 56) ^ index;
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(struct rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

static uint64_t rng_below(struct rng *r, uint64_t n)
{
	return n ? rng_next(r) % n : 0;
}

static double rng_unit(struct rng *r)
{
	return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* Uniform integer in [lo, hi]. */
static int64_t rng_range(struct rng *r, int64_t lo, int64_t hi)
{
	return hi <= lo ? lo : lo + (int64_t)rng_below(r, (uint64_t)(hi - lo) + 1);
}

static double rng_uniform(struct rng *r, double lo, double hi)
{
	return lo + (hi - lo) * rng_unit(r);
}

static bool rng_chance(struct rng *r, double p)
{
	return rng_unit(r) < p;
}

/* Cumulative weights of a Zipf law over ranks 1..n. */
static void zipf_fill(double *cdf, size_t n, double s)
{
	double acc = 0;

	for (size_t i = 0; i < n; i++) {
		acc += pow((double)(i + 1), -s);
		cdf[i] = acc;
	}
}

static size_t cdf_pick(const double *cdf, size_t n, struct rng *r)
{
	double u = rng_unit(r) * cdf[n - 1];
	size_t lo = 0, hi = n - 1;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cdf[mid] > u)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* ---------------------------------------------------------------------------
 * The code base, as text. Chains are folded stacks, outermost first, frames
 * separated by ';'. In a chain:
 *   %A          the app's module (its binary's name)
 *   $SYS(name)  the x86_64 system-call entry (rewritten for i686 hosts)
 *   |a;b|       a group repeated 1 to 4 times (recursion)
 *   +frame      a distinctive frame of an injected bug (its signature)
 */

#define K "[kernel.kallsyms]!"
#define THREAD_BASE "libc.so.6!clone;libpthread.so.0!start_thread;libstdc++.so.6!execute_native_thread_routine;"
#define LOOP_BASE THREAD_BASE                                                                   \
	"%A!std::thread::_State_impl<std::thread::_Invoker<std::tuple<app::Server::start_loops()::" \
	"{lambda()#1}> > >::_M_run();%A!app::Server::start_loops()::{lambda()#1}::operator()() "    \
	"const;%A!ev::EventLoop::run();%A!ev::EventLoop::run_once(int)"
#define LOOP_PREFIX LOOP_BASE                                                                   \
	";%A!ev::EventLoop::dispatch_ready();%A!http::Connection::on_readable();"                \
	"%A!http::Connection::process_request();%A!http::Router::dispatch(http::Request&, "      \
	"http::Response&);%A!std::function<void (http::Request&, http::Response&)>::operator()"  \
	"(http::Request&, http::Response&) const"
#define WORKER_BASE THREAD_BASE                                                                 \
	"%A!std::thread::_State_impl<std::thread::_Invoker<std::tuple<pool::ThreadPool::"          \
	"ThreadPool(unsigned long)::{lambda()#1}> > >::_M_run();%A!pool::ThreadPool::worker_loop()"
#define WORKER_PREFIX WORKER_BASE                                                               \
	";%A!std::packaged_task<void ()>::operator()();%A!std::__future_base::_Task_state<"      \
	"std::function<void ()>, std::allocator<int>, void ()>::_M_run();"                       \
	"libpthread.so.0!__pthread_once_slow;%A!std::__future_base::_State_baseV2::_M_do_set("   \
	"std::function<std::unique_ptr<std::__future_base::_Result_base, std::__future_base::"   \
	"_Result_base::_Deleter> ()>*, bool*);%A!std::function<void ()>::operator()() const"
#define GC_BASE THREAD_BASE                                                                     \
	"%A!std::thread::_State_impl<std::thread::_Invoker<std::tuple<void (mem::EpochGC::*)(), " \
	"mem::EpochGC*> > >::_M_run();%A!mem::EpochGC::run()"
#define TIMER_BASE THREAD_BASE                                                                  \
	"%A!std::thread::_State_impl<std::thread::_Invoker<std::tuple<timer::Wheel::start()::"    \
	"{lambda()#1}> > >::_M_run();%A!timer::Wheel::run()"
#define TIMER_TASK TIMER_BASE                                                                   \
	";%A!timer::Wheel::tick();%A!timer::Wheel::expire(unsigned long);"                       \
	"%A!std::function<void ()>::operator()() const"
#define IO_BASE THREAD_BASE                                                                     \
	"%A!std::thread::_State_impl<std::thread::_Invoker<std::tuple<void (logging::"            \
	"AsyncFileSink::*)(), logging::AsyncFileSink*> > >::_M_run();%A!logging::AsyncFileSink::run()"
#define MAIN_BASE "%A!_start;libc.so.6!__libc_start_main;%A!main;%A!app::Server::run()"
#define SCHED K "schedule;" K "__schedule"
#define FUTEX_WAIT "$SYS(futex);" K "do_futex;" K "futex_wait;" K "futex_wait_queue_me;" SCHED
#define COND_WAIT "libstdc++.so.6!std::condition_variable::wait(std::unique_lock<std::mutex>&);" \
	"libpthread.so.0!pthread_cond_wait@@GLIBC_2.3.2;" FUTEX_WAIT
#define POLL_WAIT "libc.so.6!__poll;$SYS(poll);" K "do_sys_poll;" K                            \
	"poll_schedule_timeout.constprop.0;" K "schedule_hrtimeout_range_clock;" SCHED
#define FSYNC_TAIL_PAGES K "file_write_and_wait_range;" K "__filemap_fdatawait_range;" K        \
	"wait_on_page_writeback;" K "wait_on_page_bit;" K "io_schedule;" SCHED
#define FSYNC_TAIL_JBD2 K "jbd2_complete_transaction;" K "jbd2_log_wait_commit;" SCHED
#define FSYNC_TAIL_FLUSH K "blkdev_issue_flush;" K "submit_bio_wait;" K                          \
	"wait_for_completion_io;" K "io_schedule_timeout;" SCHED
#define MEMMOVE "libc.so.6!__memmove_avx_unaligned_erms"
#define STRING "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >"
#define NEW_MALLOC "libstdc++.so.6!operator new(unsigned long);libc.so.6!malloc;libc.so.6!_int_malloc"

#define PAGE_FAULT K "asm_exc_page_fault;" K "exc_page_fault;" K "do_user_addr_fault;" K             \
	"handle_mm_fault;" K "__handle_mm_fault;" K "do_anonymous_page;" K "alloc_pages_vma;" K   \
	"__alloc_pages_nodemask;" K "get_page_from_freelist;" K "clear_page_erms"

/* What application functions call at the bottom of their paths. */
static const char *const lib_chains[] = {
	NEW_MALLOC,
	"libc.so.6!free;libc.so.6!_int_free",
	"libc.so.6!realloc;libc.so.6!_int_realloc;libc.so.6!_int_malloc",
	MEMMOVE,
	"libc.so.6!__memset_avx2_unaligned_erms",
	"libc.so.6!__memcmp_avx2_movbe",
	"libc.so.6!__strlen_avx2",
	"libc.so.6!__vsnprintf_internal;libc.so.6!__vfprintf_internal;libc.so.6!_IO_default_xsputn",
	"libc.so.6!__vsnprintf_internal;libc.so.6!__vfprintf_internal;libc.so.6!__printf_fp;"
	"libc.so.6!__printf_fp_l;libc.so.6!__mpn_mul_1",
	"libc.so.6!__strtod_internal;libc.so.6!____strtod_l_internal;libc.so.6!str_to_mpn",
	"libstdc++.so.6!" STRING "::_M_mutate(unsigned long, unsigned long, char const*, unsigned long);"
	NEW_MALLOC,
	"libstdc++.so.6!" STRING "::_M_append(char const*, unsigned long);" MEMMOVE,
	"libstdc++.so.6!std::_Hash_bytes(void const*, unsigned long, unsigned long)",
	"libstdc++.so.6!std::_Rb_tree_insert_and_rebalance(bool, std::_Rb_tree_node_base*, "
	"std::_Rb_tree_node_base*, std::_Rb_tree_node_base&)",
	"libstdc++.so.6!std::_Rb_tree_increment(std::_Rb_tree_node_base*)",
	"libstdc++.so.6!std::basic_ostream<char, std::char_traits<char> >& std::__ostream_insert<char, "
	"std::char_traits<char> >(std::basic_ostream<char, std::char_traits<char> >&, char const*, long);"
	"libstdc++.so.6!std::basic_streambuf<char, std::char_traits<char> >::xsputn(char const*, long)",
	PAGE_FAULT,
	"libjansson.so.4!json_dumps;libjansson.so.4!json_dump_callback;|libjansson.so.4!do_dump|;"
	"libjansson.so.4!dump_string;libjansson.so.4!utf8_iterate",
	"libjansson.so.4!json_dumps;libjansson.so.4!json_dump_callback;|libjansson.so.4!do_dump|;"
	"libjansson.so.4!strbuffer_append_bytes;" MEMMOVE,
	"libjansson.so.4!json_dumps;libjansson.so.4!json_dump_callback;|libjansson.so.4!do_dump|;"
	"libjansson.so.4!jsonp_dtostr;libc.so.6!snprintf;libc.so.6!__vsnprintf_internal;"
	"libc.so.6!__vfprintf_internal;libc.so.6!__printf_fp",
	"libjansson.so.4!json_loadb;libjansson.so.4!parse_json;|libjansson.so.4!parse_value;"
	"libjansson.so.4!parse_object|;libjansson.so.4!lex_scan;libjansson.so.4!lex_scan_string;"
	"libjansson.so.4!stream_get",
	"libjansson.so.4!json_delete;|libjansson.so.4!json_delete_object;libjansson.so.4!hashtable_do_clear;"
	"libjansson.so.4!json_delete|;libc.so.6!free;libc.so.6!_int_free",
	"libz.so.1!deflate;libz.so.1!deflate_slow;libz.so.1!longest_match",
	"libz.so.1!deflate;libz.so.1!deflate_slow;libz.so.1!fill_window;" MEMMOVE,
	"libz.so.1!deflate;libz.so.1!deflate_slow;libz.so.1!_tr_flush_block;libz.so.1!compress_block",
	"libz.so.1!inflate;libz.so.1!inflate_fast",
	"libssl.so.1.1!SSL_write;libssl.so.1.1!ssl3_write_bytes;libssl.so.1.1!do_ssl3_write;"
	"libssl.so.1.1!tls1_enc;libcrypto.so.1.1!EVP_CipherUpdate;libcrypto.so.1.1!aesni_gcm_encrypt",
	"libssl.so.1.1!SSL_write;libssl.so.1.1!ssl3_write_bytes;libssl.so.1.1!do_ssl3_write;"
	"libssl.so.1.1!ssl3_write_pending;libcrypto.so.1.1!BIO_write;libcrypto.so.1.1!bwrite_conv;"
	"libcrypto.so.1.1!sock_write;libc.so.6!__libc_write;$SYS(write);" K "ksys_write;" K "vfs_write;" K
	"new_sync_write;" K "sock_write_iter;" K "sock_sendmsg;" K "tcp_sendmsg;" K "tcp_sendmsg_locked;" K
	"tcp_push;" K "__tcp_push_pending_frames;" K "tcp_write_xmit;" K "__tcp_transmit_skb;" K
	"__ip_queue_xmit;" K "ip_output;" K "ip_finish_output2;" K "__dev_queue_xmit;" K "sch_direct_xmit;" K
	"dev_hard_start_xmit",
	"libssl.so.1.1!SSL_read;libssl.so.1.1!ssl3_read_bytes;libssl.so.1.1!ssl3_get_record;"
	"libssl.so.1.1!tls1_enc;libcrypto.so.1.1!EVP_CipherUpdate;libcrypto.so.1.1!aesni_gcm_decrypt",
	"libssl.so.1.1!SSL_read;libssl.so.1.1!ssl3_read_bytes;libssl.so.1.1!ssl3_get_record;"
	"libssl.so.1.1!ssl3_read_n;libcrypto.so.1.1!BIO_read;libcrypto.so.1.1!bread_conv;"
	"libcrypto.so.1.1!sock_read;libc.so.6!read;$SYS(read);" K "ksys_read;" K "vfs_read;" K
	"new_sync_read;" K "sock_read_iter;" K "inet_recvmsg;" K "tcp_recvmsg;" K "skb_copy_datagram_iter;" K
	"__skb_datagram_iter;" K "_copy_to_iter;" K "copy_user_enhanced_fast_string",
	"libcrypto.so.1.1!HMAC_Update;libcrypto.so.1.1!EVP_DigestUpdate;libcrypto.so.1.1!SHA256_Update;"
	"libcrypto.so.1.1!sha256_block_data_order_avx2",
	"libcrypto.so.1.1!EVP_DigestFinal_ex;libcrypto.so.1.1!SHA256_Final;"
	"libcrypto.so.1.1!sha256_block_data_order_avx2",
	"libpq.so.5!PQexecParams;libpq.so.5!PQexecFinish;libpq.so.5!PQgetResult;libpq.so.5!parseInput;"
	"libpq.so.5!pqParseInput3;libpq.so.5!getAnotherTuple;libpq.so.5!pqRowProcessor;libpq.so.5!pqAddTuple",
	"libpq.so.5!PQexecParams;libpq.so.5!PQsendQueryParams;libpq.so.5!PQsendQueryGuts;libpq.so.5!pqFlush;"
	"libpq.so.5!pqSendSome;libpq.so.5!pqsecure_write;libpq.so.5!pqsecure_raw_write;libc.so.6!__send;"
	"$SYS(sendto);" K "__sys_sendto;" K "sock_sendmsg;" K "tcp_sendmsg;" K "tcp_sendmsg_locked;" K
	"tcp_push;" K "__tcp_push_pending_frames;" K "tcp_write_xmit;" K "__tcp_transmit_skb;" K
	"__ip_queue_xmit;" K "ip_output;" K "ip_finish_output2;" K "__local_bh_enable_ip;" K "do_softirq;" K
	"net_rx_action;" K "process_backlog;" K "__netif_receive_skb_one_core;" K "ip_rcv;" K "tcp_v4_rcv",
	"libpq.so.5!PQgetvalue",
	"libpq.so.5!PQescapeStringConn;libpq.so.5!PQescapeStringInternal",
	"libhiredis.so.0.14!redisCommand;libhiredis.so.0.14!redisvCommand;"
	"libhiredis.so.0.14!redisvFormatCommand;libhiredis.so.0.14!sdscatlen;" MEMMOVE,
	"libhiredis.so.0.14!redisGetReply;libhiredis.so.0.14!redisReaderGetReply;"
	"libhiredis.so.0.14!processItem;libhiredis.so.0.14!processBulkItem;"
	"libhiredis.so.0.14!createStringObject",
	"libprotobuf.so.23!google::protobuf::MessageLite::SerializeToString(" STRING "*) const;"
	"libprotobuf.so.23!google::protobuf::MessageLite::AppendPartialToString(" STRING "*) const;"
	"libprotobuf.so.23!google::protobuf::internal::WireFormat::_InternalSerialize("
	"google::protobuf::Message const&, unsigned char*, google::protobuf::io::EpsCopyOutputStream*)",
	"libprotobuf.so.23!google::protobuf::MessageLite::ParseFromArray(void const*, int);"
	"|libprotobuf.so.23!google::protobuf::internal::ParseContext::ParseMessage<"
	"google::protobuf::MessageLite>(google::protobuf::MessageLite*, char const*)|;"
	"libprotobuf.so.23!google::protobuf::internal::ReadTag(char const*, unsigned int*, unsigned int)",
	"libicuuc.so.67!icu_67::Normalizer2Impl::decompose(char16_t const*, char16_t const*, "
	"icu_67::ReorderingBuffer*, UErrorCode&) const;libicuuc.so.67!icu_67::ReorderingBuffer::"
	"appendZeroCC(char16_t const*, char16_t const*, UErrorCode&)",
	"libicuuc.so.67!u_strToLower_67;libicuuc.so.67!ustrcase_map_67;libicuuc.so.67!toLower",
	"libpcre2-8.so.0!pcre2_match_8;libpcre2-8.so.0!match",
	"libacme.so.2!acme::metrics::Histogram<double>::record(double);"
	"libacme.so.2!acme::metrics::Histogram<double>::bucket_index(double) const",
	"libacme.so.2!acme::log::Logger::log<acme::log::Field, acme::log::Field>;"
	"libacme.so.2!acme::log::Formatter::format;libacme.so.2!acme::log::Formatter::append_escaped;" MEMMOVE,
	"libacme.so.2!acme::trace::Span::finish;libacme.so.2!acme::trace::Exporter<"
	"acme::trace::OtlpEncoder>::enqueue;libacme.so.2!acme::util::MpscQueue<acme::trace::SpanData>::push",
	"libacme.so.2!acme::config::Snapshot::get<std::string>;libacme.so.2!acme::util::FlatMap<"
	"std::string, acme::config::Value>::find;libstdc++.so.6!std::_Hash_bytes(void const*, "
	"unsigned long, unsigned long)",
	"libacme.so.2!acme::util::StringPiece::split;libacme.so.2!acme::util::SmallVector<"
	"acme::util::StringPiece, 8u>::grow;libc.so.6!realloc;libc.so.6!_int_realloc",
};
#define NLIBS (sizeof(lib_chains) / sizeof(lib_chains[0]))

/* Where a request handler blocks in normal operation (database, cache, downstream). */
static const char *const route_wait_chains[] = {
	"libpq.so.5!PQexecParams;libpq.so.5!PQexecFinish;libpq.so.5!PQgetResult;libpq.so.5!pqWait;"
	"libpq.so.5!pqWaitTimed;libpq.so.5!pqSocketCheck;libpq.so.5!pqSocketPoll;" POLL_WAIT,
	"libhiredis.so.0.14!redisCommand;libhiredis.so.0.14!redisvCommand;"
	"libhiredis.so.0.14!__redisBlockForReply;libhiredis.so.0.14!redisGetReply;"
	"libhiredis.so.0.14!redisBufferRead;libc.so.6!read;$SYS(read);" K "ksys_read;" K "vfs_read;" K
	"new_sync_read;" K "sock_read_iter;" K "inet_recvmsg;" K "tcp_recvmsg;" K "sk_wait_data;" K
	"wait_woken;" K "schedule_timeout;" SCHED,
	"libcurl.so.4!curl_easy_perform;libcurl.so.4!easy_perform;libcurl.so.4!easy_transfer;"
	"libcurl.so.4!curl_multi_poll;libcurl.so.4!multi_wait;libcurl.so.4!Curl_poll;" POLL_WAIT,
};
#define CHAIN_CURL 2

/* A request thread waiting for a task it handed to the worker pool. */
static const char handoff_chain[] =
	"%A!std::__basic_future<void>::_M_get_result() const;%A!std::__future_base::_State_baseV2::wait();"
	"libstdc++.so.6!std::__atomic_futex_unsigned_base::_M_futex_wait_until(unsigned int*, unsigned int, "
	"bool, std::chrono::duration<long, std::ratio<1l, 1l> >, std::chrono::duration<long, "
	"std::ratio<1l, 1000000000l> >);libc.so.6!syscall;" FUTEX_WAIT;

static const char loop_idle_chain[] =
	LOOP_BASE ";%A!ev::EpollPoller::wait(int);libc.so.6!epoll_wait;$SYS(epoll_wait);" K
	"do_epoll_wait;" K "ep_poll;" K "schedule_hrtimeout_range_clock;" SCHED;
static const char worker_idle_chain[] = WORKER_BASE ";" COND_WAIT;
static const char main_wait_chain[] =
	MAIN_BASE ";%A!app::Server::wait_for_signal();libc.so.6!sigwait;libc.so.6!__sigtimedwait;"
	"$SYS(rt_sigtimedwait);" K "do_sigtimedwait;" K "schedule_hrtimeout_range_clock;" SCHED;

static const char *const gc_run_chains[] = {
	GC_BASE ";%A!mem::EpochGC::collect();%A!mem::EpochGC::advance_epoch();"
	"%A!mem::ThreadRegistry::min_epoch() const",
	GC_BASE ";%A!mem::EpochGC::collect();%A!mem::RetireList::reclaim(unsigned long);"
	"%A!mem::Retired<mem::Node>::destroy(void*);libc.so.6!free;libc.so.6!_int_free",
	GC_BASE ";%A!mem::EpochGC::collect();%A!mem::RetireList::reclaim(unsigned long);libc.so.6!free;"
	"libc.so.6!_int_free;libc.so.6!malloc_consolidate",
	GC_BASE ";%A!mem::EpochGC::collect();%A!mem::RetireList::sort_by_epoch();"
	"%A!std::__introsort_loop<mem::Retired*, long, __gnu_cxx::__ops::_Iter_comp_iter<mem::ByEpoch> >",
	GC_BASE ";%A!mem::EpochGC::compact_arenas();%A!mem::Arena::release_free_pages();libc.so.6!madvise;"
	"$SYS(madvise);" K "do_madvise.part.0;" K "zap_page_range;" K "unmap_page_range",
};
static const char *const gc_wait_chains[] = {
	GC_BASE ";%A!std::condition_variable::__wait_until_impl<std::chrono::duration<long, "
	"std::ratio<1l, 1000000000l> > >;libpthread.so.0!pthread_cond_timedwait@@GLIBC_2.3.2;" FUTEX_WAIT,
};
static const char *const timer_run_chains[] = {
	TIMER_BASE ";%A!timer::Wheel::tick();%A!timer::Wheel::expire(unsigned long);"
	"%A!timer::Wheel::cascade(int)",
	TIMER_TASK ";%A!metrics::Reporter::flush_interval();"
	"libacme.so.2!acme::metrics::Histogram<double>::snapshot() const",
	TIMER_TASK ";%A!net::ConnectionPool::reap_idle();%A!net::Connection::close();libc.so.6!__close;"
	"$SYS(close);" K "__close_fd;" K "filp_close",
	TIMER_BASE ";%A!timer::Wheel::tick();libc.so.6!__clock_gettime;[vdso]!__vdso_clock_gettime",
};
static const char *const timer_wait_chains[] = {
	TIMER_BASE ";libstdc++.so.6!std::this_thread::__sleep_for(std::chrono::duration<long, "
	"std::ratio<1l, 1l> >, std::chrono::duration<long, std::ratio<1l, 1000000000l> >);"
	"libc.so.6!__nanosleep;$SYS(nanosleep);" K "hrtimer_nanosleep;" K "do_nanosleep;" SCHED,
};
#define IO_WRITE IO_BASE ";%A!logging::AsyncFileSink::flush();%A!logging::AsyncFileSink::write_batch();" \
	"libc.so.6!__libc_write;$SYS(write);" K "ksys_write;" K "vfs_write;" K "new_sync_write;" K      \
	"ext4_file_write_iter;" K "ext4_buffered_write_iter;" K "generic_perform_write;"
static const char *const io_run_chains[] = {
	IO_WRITE K "iov_iter_copy_from_user_atomic;" K "copy_user_enhanced_fast_string",
	IO_WRITE K "ext4_da_write_begin;" K "grab_cache_page_write_begin;" K "pagecache_get_page",
	IO_BASE ";%A!logging::AsyncFileSink::flush();%A!logging::Record::format(std::string&) const;" MEMMOVE,
};
#define IO_SYNC IO_BASE ";%A!logging::AsyncFileSink::flush();libc.so.6!fdatasync;$SYS(fdatasync);" K \
	"do_fsync;" K "vfs_fsync_range;" K "ext4_sync_file;"
static const char *const io_sync_chains[] = { IO_SYNC FSYNC_TAIL_PAGES, IO_SYNC FSYNC_TAIL_JBD2 };
static const char *const io_idle_chains[] = { IO_BASE ";" COND_WAIT };

/* i686 hosts run the 32-bit build in compat mode: other libc variants, and every
 * system call enters the kernel through the vDSO and the 32-bit entry path. */
static const char *const i686_subst[][2] = {
	{ MEMMOVE, "libc.so.6!__memmove_ssse3" },
	{ "libc.so.6!__memset_avx2_unaligned_erms", "libc.so.6!__memset_sse2" },
	{ "libc.so.6!__memcmp_avx2_movbe", "libc.so.6!__memcmp_sse4_2" },
	{ "libc.so.6!__strlen_avx2", "libc.so.6!__strlen_sse2" },
	{ "libc.so.6!__strchr_avx2", "libc.so.6!__strchr_sse2" },
	{ "libcrypto.so.1.1!sha256_block_data_order_avx2", "libcrypto.so.1.1!sha256_block_data_order_ssse3" },
	{ "libcrypto.so.1.1!aesni_gcm_encrypt", "libcrypto.so.1.1!aesni_ctr32_encrypt_blocks" },
	{ "libcrypto.so.1.1!aesni_gcm_decrypt", "libcrypto.so.1.1!aesni_ctr32_encrypt_blocks" },
	{ K "__do_sys_newstat", K "__do_sys_stat64" },
};
static const char *const i686_syscalls[][2] = {
	{ "newstat", "__ia32_sys_stat64" },
	{ "futex", "__ia32_sys_futex_time32" },
	{ "nanosleep", "__ia32_sys_nanosleep_time32" },
	{ "mmap", "__ia32_sys_mmap_pgoff" },
	{ "rt_sigtimedwait", "__ia32_compat_sys_rt_sigtimedwait_time32" },
	{ "writev", "__ia32_compat_sys_writev" },
};

/* Words for generated function names. */
static const char *const ns_words[] = {
	"cart", "pricing", "catalog", "inventory", "payment", "session", "auth", "render", "query", "rank",
	"geo", "cache", "store", "net", "util", "metrics", "feature", "tax", "shipping", "user", "review",
	"ads", "spell", "facet", "index", "fulfil", "fraud", "locale", "media", "recs", "order", "account",
	"wallet", "loyalty", "notify", "quota", "routing", "shard", "schema", "codec",
};
static const char *const noun_a[] = {
	"Order", "Cart", "Item", "Price", "Tax", "Ship", "Stock", "Coupon", "User", "Session", "Token",
	"Query", "Term", "Doc", "Field", "Facet", "Shard", "Segment", "Posting", "Score", "Rank", "Geo",
	"Locale", "Currency", "Promo", "Review", "Image", "Page", "Template", "Route", "Header", "Cookie",
	"Quota", "Fraud", "Ledger", "Wallet", "Invoice", "Refund", "Address", "Slot",
};
static const char *const noun_b[] = {
	"Builder", "Cache", "Store", "Index", "Reader", "Writer", "Parser", "Encoder", "Decoder", "Filter",
	"Scorer", "Ranker", "Resolver", "Validator", "Manager", "Registry", "Table", "Client", "Handler",
	"Visitor", "Iterator", "Buffer", "View", "Map", "Set", "Tree", "Node", "Batch", "Plan", "Context",
	"Policy", "Rule", "Model", "Service", "Factory", "Pool", "Queue", "Tracker", "Formatter", "Selector",
};
static const char *const verbs[] = {
	"get", "set", "load", "store", "build", "compute", "apply", "merge", "find", "lookup", "insert",
	"erase", "validate", "resolve", "parse", "encode", "decode", "serialize", "render", "flush",
	"collect", "update", "refresh", "score", "rank", "filter", "visit", "emit", "append", "reserve",
	"release", "fetch", "prepare", "finalize", "normalize", "split", "join", "hash", "compare",
	"evaluate", "expand", "rewrite", "init", "dispatch", "process", "check", "format", "convert",
	"select", "gather",
};
static const char *const objs[] = {
	"items", "rows", "total", "fields", "tokens", "rules", "entry", "value", "key", "batch", "page",
	"result", "headers", "body", "span", "node", "children", "bucket", "segment", "weights", "terms",
	"prices", "limits", "cursor", "state", "options", "lines", "groups", "matches", "candidates",
};
#define NWORDS(a) (sizeof(a) / sizeof((a)[0]))

/* ---------------------------------------------------------------------------
 * Apps, routes and injected bugs.
 */

struct route_spec {
	const char *path;
	const char *handler;
	int threshold_ms;
	int weight;
};

struct app_spec {
	const char *name;
	const char *host_prefix;
	const char *versions[3];
	int vweights[3];
	int nversions;
	const struct route_spec *routes;
	int nroutes;
};

static const struct route_spec checkout_routes[] = {
	{ "POST /cart/checkout", "CheckoutSubmit", 250, 35 },
	{ "GET /cart", "CartView", 120, 30 },
	{ "POST /cart/items", "CartAddItem", 150, 25 },
	{ "GET /orders/{id}", "OrderStatus", 100, 10 },
};
static const struct route_spec search_routes[] = {
	{ "GET /search", "SearchQuery", 150, 60 },
	{ "GET /suggest", "Suggest", 60, 25 },
	{ "GET /facets", "FacetCounts", 120, 15 },
};
static const struct route_spec generic_routes[] = {
	{ "GET /api/v1/items", "ItemsList", 150, 50 },
	{ "POST /api/v1/items", "ItemsCreate", 200, 30 },
	{ "GET /api/v1/items/{id}", "ItemsGet", 80, 20 },
};

static const struct app_spec known_apps[] = {
	{ "checkout", "web", { "2.3.1", "2.4.0", "2.4.1" }, { 30, 50, 20 }, 3, checkout_routes, 4 },
	{ "search", "search", { "5.12.0", "5.13.2" }, { 55, 45, 0 }, 2, search_routes, 3 },
};
static const struct app_spec generic_app = {
	NULL, NULL, { "1.4.0", "1.5.0", "1.5.1" }, { 30, 50, 20 }, 3, generic_routes, 3
};

enum bug_type { B_TWO_CALLERS, B_ARCH32, B_CONVOY, B_DISKIO, B_REGRESSION, NTYPES };

static const char *const type_names[NTYPES] = {
	"slow_path_two_callers", "arch32_variant", "lock_convoy", "sync_disk_io", "version_regression",
};

static const struct {
	double fraction;    /* of the streams the bug can hit */
	int cost_lo_ms, cost_hi_ms;
	bool wait;          /* its cost on the symptom thread is waiting, not running */
} type_params[NTYPES] = {
	{ 0.30, 150, 400, false },
	{ 0.22, 120, 300, false },
	{ 0.18, 150, 450, true },
	{ 0.15, 80, 300, true },
	{ 0.60, 150, 350, false },
};

enum role { R_ST, R_LOOP, R_WORKER, R_GC, R_TIMER, R_IO, R_MAIN };

struct flavor {
	const char *name;
	const char *desc;
	const char *callers[MAX_CALLERS];  /* NULL: one caller only */
	const char *core;                  /* + marks the signature */
	const char *tails[5];
	int holder_role;                   /* lock_convoy: R_WORKER or R_TIMER */
	const char *holder;                /* lock_convoy: the holder's whole run path */
	const char *holder_tails[4];
};

#define MUTEX_WAIT "+libpthread.so.0!__pthread_mutex_lock;+libpthread.so.0!__lll_lock_wait;" FUTEX_WAIT

static const struct flavor flavors[NTYPES][3] = {
	[B_TWO_CALLERS] = {
		{ "coupon-regex-recompile",
		  "coupon rules compile their regular expression on every match; reached from two callers",
		  { "%A!cart::CartService::apply_promotions",
		    "%A!order::OrderPricer::price_order;%A!promo::PromotionEngine::evaluate" },
		  "+%A!promo::CouponRule::matches;%A!promo::CouponRule::pattern;+libpcre2-8.so.0!pcre2_compile_8",
		  { "libpcre2-8.so.0!parse_regex",
		    "libpcre2-8.so.0!compile_regex;libpcre2-8.so.0!compile_branch",
		    "libpcre2-8.so.0!compile_regex;libpcre2-8.so.0!compile_branch;"
		    "libpcre2-8.so.0!add_to_class_internal",
		    "|libpcre2-8.so.0!compile_regex;libpcre2-8.so.0!compile_branch|",
		    "libpcre2-8.so.0!compile_regex;libpcre2-8.so.0!compile_branch;libpcre2-8.so.0!add_list_to_class" },
		  0, NULL, { NULL } },
		{ "slug-transliterator-create",
		  "an ICU transliterator is created for every slug; reached from two callers",
		  { "%A!catalog::ProductView::render_title",
		    "%A!seo::SitemapWriter::write_entry;%A!seo::UrlBuilder::product_url" },
		  "+%A!text::SlugBuilder::build;+libicui18n.so.67!icu_67::Transliterator::createInstance;"
		  "libicui18n.so.67!icu_67::Transliterator::createBasicInstance;"
		  "+libicui18n.so.67!icu_67::TransliteratorRegistry::get",
		  { "libicui18n.so.67!icu_67::TransliteratorRegistry::find;"
		    "libicui18n.so.67!icu_67::TransliteratorRegistry::findInDynamicStore",
		    "libicui18n.so.67!icu_67::TransliteratorRegistry::instantiateEntry;"
		    "libicui18n.so.67!icu_67::TransliteratorParser::parse;"
		    "libicui18n.so.67!icu_67::TransliteratorParser::parseRules",
		    "libicui18n.so.67!icu_67::TransliteratorRegistry::instantiateEntry;"
		    "libicuuc.so.67!icu_67::UnicodeSet::applyPattern;"
		    "libicuuc.so.67!icu_67::UnicodeSet::applyPatternIgnoreSpace",
		    "libicui18n.so.67!icu_67::TransliteratorRegistry::instantiateEntry;"
		    "libicuuc.so.67!icu_67::UnicodeString::doAppend;" MEMMOVE },
		  0, NULL, { NULL } },
		{ "tenant-config-reparse",
		  "the tenant configuration JSON is parsed again on every lookup; reached from two callers",
		  { "%A!auth::RateLimiter::limit_for", "%A!render::Layout::theme;%A!render::Theme::resolve" },
		  "+%A!settings::TenantConfig::get_value;+libjansson.so.4!json_loads;+libjansson.so.4!parse_json",
		  { "|libjansson.so.4!parse_value;libjansson.so.4!parse_object|;libjansson.so.4!lex_scan;"
		    "libjansson.so.4!lex_scan_string",
		    "|libjansson.so.4!parse_value;libjansson.so.4!parse_object|;"
		    "libjansson.so.4!json_object_set_new_nocheck;libjansson.so.4!hashtable_set;"
		    "libjansson.so.4!hashtable_do_rehash",
		    "|libjansson.so.4!parse_value;libjansson.so.4!parse_array|;libjansson.so.4!lex_scan;"
		    "libjansson.so.4!lex_scan_number;libc.so.6!__strtod_internal",
		    "libjansson.so.4!lex_init;libjansson.so.4!strbuffer_init;libjansson.so.4!jsonp_malloc" },
		  0, NULL, { NULL } },
	},
	[B_ARCH32] = {
		{ "feature-flag-stat-storm",
		  "feature flags stat() their file on every check; i686 hosts add the 32-bit syscall path",
		  { "%A!feature::FlagSet::is_enabled", NULL },
		  "+%A!feature::FlagSet::reload_if_changed;+libc.so.6!__xstat64;$SYS(newstat);"
		  K "__do_sys_newstat;+" K "vfs_statx;+" K "filename_lookup;+" K "path_lookupat",
		  { K "link_path_walk.part.0;" K "walk_component;" K "lookup_fast;" K "__d_lookup_rcu",
		    K "link_path_walk.part.0;" K "inode_permission;" K "generic_permission",
		    K "complete_walk;" K "unlazy_walk;" K "legitimize_path.isra.0",
		    K "link_path_walk.part.0;" K "walk_component;" K "step_into" },
		  0, NULL, { NULL } },
		{ "token-getrandom-syscall",
		  "every session token reads the kernel CSPRNG; i686 hosts add the 32-bit syscall path",
		  { "%A!session::SessionManager::create", NULL },
		  "+%A!session::TokenMinter::mint;+libc.so.6!getrandom;$SYS(getrandom);"
		  "+" K "urandom_read_nowarn.isra.0;+" K "extract_crng",
		  { K "_extract_crng;" K "chacha20_block;" K "chacha_permute",
		    K "_extract_crng;" K "chacha20_block",
		    K "crng_backtrack_protect;" K "_extract_crng" },
		  0, NULL, { NULL } },
		{ "buffer-pool-mmap",
		  "the buffer pool maps a fresh region per response; i686 hosts add the 32-bit syscall path",
		  { "%A!net::ResponseWriter::reserve", NULL },
		  "+%A!io::BufferPool::acquire;+libc.so.6!mmap64;$SYS(mmap);+" K "ksys_mmap_pgoff;+" K
		  "vm_mmap_pgoff;+" K "do_mmap",
		  { K "mmap_region;" K "vma_link;" K "__vma_link_rb",
		    K "get_unmapped_area;" K "arch_get_unmapped_area_topdown;" K "vm_unmapped_area",
		    K "mmap_region;" K "perf_event_mmap;" K "perf_iterate_sb",
		    K "mmap_region;" K "vm_area_alloc;" K "kmem_cache_alloc" },
		  0, NULL, { NULL } },
	},
	[B_CONVOY] = {
		{ "stock-ledger-convoy",
		  "requests queue on the stock ledger mutex while a replenish job rebalances it",
		  { "%A!order::OrderFlow::reserve_items",
		    "%A!cart::CartService::add_item;%A!cart::CartService::check_stock" },
		  "+%A!inventory::StockLedger::reserve;" MUTEX_WAIT,
		  { NULL },
		  R_WORKER,
		  WORKER_PREFIX ";+%A!inventory::ReplenishJob::run;+%A!inventory::StockLedger::rebalance;"
		  "+%A!std::map<std::string, inventory::Order>::find",
		  { "%A!std::_Rb_tree<std::string, std::pair<std::string const, inventory::Order>, "
		    "std::_Select1st<std::pair<std::string const, inventory::Order> >, std::less<std::string> "
		    ">::_M_lower_bound",
		    "%A!std::_Rb_tree<std::string, std::pair<std::string const, inventory::Order>, "
		    "std::_Select1st<std::pair<std::string const, inventory::Order> >, std::less<std::string> "
		    ">::_M_lower_bound;libc.so.6!__memcmp_avx2_movbe",
		    "libstdc++.so.6!" STRING "::compare(" STRING " const&) const;libc.so.6!__memcmp_avx2_movbe",
		    "" } },
		{ "session-store-convoy",
		  "requests queue on the session store lock while the timer thread expires idle sessions",
		  { "%A!auth::Authenticator::check_session", "%A!session::SessionMiddleware::before" },
		  "+%A!session::SessionStore::touch;+libpthread.so.0!pthread_rwlock_wrlock;"
		  "+libpthread.so.0!__pthread_rwlock_wrlock_full;" FUTEX_WAIT,
		  { NULL },
		  R_TIMER,
		  TIMER_TASK ";+%A!session::SessionStore::expire_idle;+%A!session::SessionStore::scan_shard;"
		  "+%A!std::unordered_map<std::string, session::Session>::erase",
		  { "%A!std::_Hashtable<std::string, std::pair<std::string const, session::Session> >::_M_erase",
		    "%A!session::Session::~Session();libc.so.6!free;libc.so.6!_int_free",
		    "libstdc++.so.6!std::_Hash_bytes(void const*, unsigned long, unsigned long)",
		    "" } },
		{ "metrics-registry-convoy",
		  "requests queue on the metrics registry mutex while an export job renders it",
		  { "%A!http::AccessLog::record;%A!metrics::RequestMetrics::observe",
		    "%A!db::Pool::checkout;%A!metrics::PoolMetrics::inc_waits" },
		  "+%A!metrics::Registry::counter;" MUTEX_WAIT,
		  { NULL },
		  R_WORKER,
		  WORKER_PREFIX ";+%A!metrics::ExportJob::run;+%A!metrics::Registry::snapshot;"
		  "+%A!metrics::Registry::render_text",
		  { "libacme.so.2!acme::fmt::detail::format_decimal<unsigned long>",
		    "libacme.so.2!acme::fmt::vformat_to;libacme.so.2!acme::fmt::detail::write_padded",
		    "libstdc++.so.6!" STRING "::_M_append(char const*, unsigned long);" MEMMOVE,
		    "%A!std::map<std::string, metrics::Series>::operator[]" } },
	},
	[B_DISKIO] = {
		{ "order-journal-fdatasync",
		  "the order journal calls fdatasync in the request path",
		  { "%A!order::OrderFlow::commit", "%A!payment::CaptureService::record_capture" },
		  "+%A!audit::OrderJournal::append;+%A!audit::OrderJournal::sync;+libc.so.6!fdatasync;"
		  "$SYS(fdatasync);" K "do_fsync;" K "vfs_fsync_range;+" K "ext4_sync_file",
		  { FSYNC_TAIL_PAGES, FSYNC_TAIL_JBD2, FSYNC_TAIL_FLUSH },
		  0, NULL, { NULL } },
		{ "segment-msync-commit",
		  "index updates msync the segment file in the request path",
		  { "%A!index::LiveIndex::apply_update", "%A!query::QueryCache::persist" },
		  "+%A!index::SegmentWriter::commit;+%A!index::MmapFile::flush;+libc.so.6!msync;$SYS(msync);"
		  K "vfs_fsync_range;+" K "ext4_sync_file",
		  { FSYNC_TAIL_PAGES, FSYNC_TAIL_JBD2, FSYNC_TAIL_FLUSH },
		  0, NULL, { NULL } },
		{ "local-cache-sqlite-sync",
		  "the local SQLite cache commits synchronously in the request path",
		  { "%A!recs::RecentlyViewed::remember", "%A!user::Preferences::save" },
		  "+%A!store::LocalCache::persist;+libsqlite3.so.0!sqlite3_step;libsqlite3.so.0!sqlite3VdbeExec;"
		  "libsqlite3.so.0!sqlite3VdbeHalt;libsqlite3.so.0!sqlite3BtreeCommitPhaseOne;"
		  "libsqlite3.so.0!sqlite3PagerCommitPhaseOne;+libsqlite3.so.0!unixSync;+libc.so.6!fdatasync;"
		  "$SYS(fdatasync);" K "do_fsync;" K "vfs_fsync_range;+" K "ext4_sync_file",
		  { FSYNC_TAIL_PAGES, FSYNC_TAIL_JBD2, FSYNC_TAIL_FLUSH },
		  0, NULL, { NULL } },
	},
	[B_REGRESSION] = {
		{ "product-cache-rebuild",
		  "one version rebuilds the product cache index on every lookup",
		  { "%A!catalog::CatalogService::get_product",
		    "%A!cart::CartView::enrich_items;%A!catalog::CatalogService::get_products" },
		  "+%A!catalog::ProductCache::lookup;+%A!catalog::ProductCache::rebuild_index",
		  { "%A!std::vector<catalog::Product, std::allocator<catalog::Product> >::_M_realloc_insert<"
		    "catalog::Product const&>;" MEMMOVE,
		    "%A!std::__introsort_loop<__gnu_cxx::__normal_iterator<catalog::Product*, std::vector<"
		    "catalog::Product> >, long, __gnu_cxx::__ops::_Iter_comp_iter<catalog::ByPrice> >;"
		    "|%A!std::__introsort_loop<__gnu_cxx::__normal_iterator<catalog::Product*, std::vector<"
		    "catalog::Product> >, long, __gnu_cxx::__ops::_Iter_comp_iter<catalog::ByPrice> >|;"
		    "%A!catalog::ByPrice::operator()(catalog::Product const&, catalog::Product const&) const",
		    "%A!catalog::Product::Product(catalog::Product const&);"
		    "%A!catalog::Attributes::Attributes(catalog::Attributes const&)",
		    "%A!std::unordered_map<unsigned long, unsigned long>::operator[];"
		    "libstdc++.so.6!std::__detail::_Prime_rehash_policy::_M_need_rehash(unsigned long, "
		    "unsigned long, unsigned long) const" },
		  0, NULL, { NULL } },
		{ "query-plan-cache-miss",
		  "one version stopped caching query plans and re-plans every query",
		  { "%A!query::Executor::run", "%A!query::Suggester::complete;%A!query::Executor::run_prefix" },
		  "+%A!query::Planner::plan;+%A!query::Planner::enumerate_joins;+%A!query::CostModel::estimate",
		  { "%A!query::Histogram::selectivity",
		    "|%A!query::Planner::enumerate_joins;%A!query::CostModel::estimate|;"
		    "%A!query::CostModel::estimate_join",
		    "%A!query::CostModel::estimate_join;libm.so.6!__log_fma",
		    "%A!std::vector<query::Plan, std::allocator<query::Plan> >::emplace_back<query::Plan>;"
		    "%A!query::Plan::Plan(query::Plan&&)" },
		  0, NULL, { NULL } },
		{ "template-recompile",
		  "one version compiles page templates on every render",
		  { "%A!render::PageRenderer::render", "%A!render::EmailRenderer::render_receipt" },
		  "+%A!render::TemplateCache::get;+%A!render::Template::compile;+%A!render::Lexer::tokenize",
		  { "%A!render::Lexer::next_token;%A!render::Lexer::scan_identifier",
		    "%A!render::Lexer::next_token;libc.so.6!__strchr_avx2",
		    "%A!std::vector<render::Token, std::allocator<render::Token> >::_M_realloc_insert<"
		    "render::Token>;" MEMMOVE,
		    "%A!render::Lexer::next_token" },
		  0, NULL, { NULL } },
	},
};

/* ---------------------------------------------------------------------------
 * Data structures.
 */

/* Every frame string and every stack, interned once for the whole run. */
struct store {
	struct intern *fmap;        /* frame string -> frame id */
	struct intern *smap;        /* frame-id sequence -> stack id */
	uint32_t *fr;               /* frames of all stacks, concatenated */
	size_t nfr, capfr;
	uint32_t *soff;
	uint16_t *slen;
	size_t nst, capst;
	int32_t *falt;              /* per frame: its i686 substitute, -1 none, -2 unknown */
	uint8_t *fuse;              /* per frame: 1 used on x86_64, 2 used on i686 */
	size_t capf;
};

/* A stack as it is on each architecture: x86_64 and i686. */
struct lstk {
	uint32_t id[2];
};

struct pool {
	struct lstk *s;
	size_t n, cap;
	double *cdf;                /* popularity: Zipf over the pool order */
};

struct seq {
	uint32_t f[MAX_SEQ];
	uint8_t mark[MAX_SEQ];
	size_t n;
};

struct fn {
	uint32_t fid;
	uint8_t level;
	uint8_t ns;
	uint8_t rec;                /* recursive: repeats itself when entered */
	uint8_t nlibs;
	uint16_t libs[3];
	uint32_t callee0;           /* index into app.callees */
	uint8_t ncallees;
};

struct route {
	const struct route_spec *spec;
	uint32_t wrap_fid, handler_fid;
	uint32_t fn;                /* the handler's node in the call graph */
	struct pool run, wait, handoff;
};

struct app {
	char name[40];
	char mod[40];
	char host_prefix[24];
	const struct app_spec *spec;
	int idx;
	int nversions;
	char build_ids[3][2][41];
	struct route routes[MAX_ROUTES];
	int nroutes;
	double route_cdf[MAX_ROUTES];
	double version_cdf[3];
	char classes[NWORDS(ns_words)][6][40];
	int nclasses[NWORDS(ns_words)];
	int nsidx[16];              /* the namespaces this app uses */
	struct fn *fns;
	size_t nfns;
	uint32_t *callees;
	size_t ncallees, capcallees;
	int nlevels;                /* depth of the generated call graph */
	uint32_t *lvl_start;        /* fns sorted by level: [lvl_start[l], lvl_start[l+1]) */
	uint16_t *fanin;            /* callers of each function so far */
	uint32_t tasks[12];
	int ntasks;
	struct seq loop_prefix, worker_prefix;
	struct pool worker_run, worker_idle, loop_idle, main_wait;
	struct pool gc_run, gc_wait, timer_run, timer_wait, io_run, io_sync, io_idle;
	int *hosts;
	int nhosts;
};

struct host {
	char name[64];
	int app, version, arch, cpus, workers, loops, db_pool;
	const char *os, *kernel, *region, *tier;
	int64_t period, clock, pid;
	char cpus_s[16], workers_s[16], db_pool_s[16], hz_s[16];
	struct wire_label labels[10];
	size_t nlabels;
};

struct bhit {
	uint32_t stream;
	uint32_t rec;               /* its stream's place in gen.recs (not its index with --part) */
	uint8_t variant;
	int64_t cost, wait_cost;
};

struct variant {
	char name[200];
	char when[96];
	int caller, arch;           /* arch -1: any */
	uint32_t frames[MAX_SEQ];
	size_t nframes;
};

struct bug {
	int id, type, app, rename, version;
	char name[160];
	const struct flavor *fl;
	int ncallers, nvariants;
	double fraction;
	uint32_t frames[64];        /* the signature, of kind run unless a wait bug */
	size_t nframes;
	uint32_t wframes[64];       /* lock_convoy: the waiting side's signature */
	size_t nwframes;
	struct variant var[MAX_CALLERS];
	struct pool pools[MAX_CALLERS][MAX_ROUTES];
	struct pool holder;
	struct bhit *hits;
	size_t nhits, caphits;
	size_t var_hits[MAX_CALLERS];
	int64_t cost, wait_cost;
};

struct opts {
	int64_t streams, events, hosts, bugs, distinct, depth, baseline, first;
	uint64_t seed;
	const char *apps, *out, *truth;
	bool validate, stats;
	bool regression_conf;       /* the version regression also needs conf.db_pool = 16 */
	int64_t part, parts;        /* --part I/N: the streams whose index is I modulo N */
	double wait_share;          /* --wait-share: the event loops' share of waits, 0 = as modelled */
};

/* One event while a stream is built. */
struct ev {
	int64_t tid, ts, dur, readier;
	uint32_t stack;             /* global stack id */
	uint32_t seq;
	uint8_t kind;               /* enum wire_kind */
	uint8_t th;                 /* index into sbuild.th */
	uint8_t tag;                /* bug index + 1 for injected cost, else 0 */
};

struct thr {
	int64_t tid;
	int role;
	int64_t busy;               /* its next event starts at or after this */
};

struct ws {
	uint32_t idx[WS_MAX];
	double cdf[WS_MAX];
	uint16_t guide[WS_MAX];     /* guide[k]: first i with cdf[i] > k/WS_MAX of the total */
	size_t n;
	const struct pool *pool;
};

struct shit {
	int bug, variant;
	int64_t cost, wait_cost;
};

struct srec {                   /* what the truth says about one stream */
	char id[37];
	uint32_t index;
	int host, route;
	int64_t s0, s1, threshold;
	int64_t aoi_run, aoi_wait, total_run, total_wait;
	int8_t bugs[MAX_HITS];
	int nbugs;
	bool base;                  /* a baseline stream: a normal unit */
};

struct gen {
	struct opts o;
	struct store st;
	struct app apps[MAX_APPS];
	int napps;
	struct host *hosts;
	int nhosts;
	struct bug bugs[MAX_BUGS];
	int nbugs;
	uint32_t f_entry64, f_dosys64, f_vdso, f_entry32, f_sysenter32, f_fast32, f_dofast32;
	/* per stream, reused */
	struct arena *arena, *varena;
	struct buf out;
	struct wire_parser *parser;
	int32_t *smap, *fmap;
	uint32_t *touched_s, *touched_f;
	uint32_t *pool_mark;        /* per stack id: stream index + 1 when in a working set */
	struct srec *recs;
	size_t nrecs, caprecs;
	size_t lib_len[NLIBS];      /* frames in each library chain, groups once */
	uint32_t mark;              /* the last working-set mark handed out */
	double ws_cdf[WS_MAX];      /* popularity inside a working set */
	/* fleet statistics */
	uint8_t *stack_seen, *frame_seen;
	uint64_t st_events, st_depth_sum, st_stacks_sum, st_frames_sum, st_run, st_wait;
	uint64_t st_win_events, st_win_depth;
	size_t st_min_stacks, st_max_stacks, st_distinct_stacks, st_distinct_frames;
};

struct sbuild {
	struct gen *g;
	struct rng r;
	uint32_t index;
	bool base;                  /* a normal unit, no bug, not slow: role baseline */
	struct host *h;
	struct app *a;
	int route, arch;
	int64_t p;
	double scale;
	int64_t events;
	struct ev *ev;
	size_t nev, cap;
	uint32_t seq;
	struct thr th[MAX_THREADS];
	int nth, st, gc, timer, io, mainthr;
	int loops[8], nloops;       /* event loops other than the symptom thread */
	int workers[16], nworkers;
	struct ws wsr[MAX_ROUTES], wsw;
	struct shit hits[MAX_HITS];
	int nhits;
	char id[37];
	int64_t T0, s0, s1, T1, threshold;
};

/* ---------------------------------------------------------------------------
 * The store.
 */

static uint32_t frame_put(struct store *st, const char *s, size_t n)
{
	bool added;
	int64_t id = intern_put(st->fmap, s, n, &added);

	if (id < 0)
		die("out of memory (frames)");
	if ((size_t)id >= st->capf) {
		size_t cap = st->capf ? st->capf * 2 : 4096;
		st->falt = xrealloc(st->falt, cap * sizeof(*st->falt));
		st->fuse = xrealloc(st->fuse, cap * sizeof(*st->fuse));
		for (size_t i = st->capf; i < cap; i++) {
			st->falt[i] = -2;
			st->fuse[i] = 0;
		}
		st->capf = cap;
	}
	return (uint32_t)id;
}

static uint32_t frame_cstr(struct store *st, const char *s)
{
	return frame_put(st, s, strlen(s));
}

static const char *frame_str(const struct store *st, uint32_t id)
{
	return intern_key(st->fmap, id, NULL);
}

/* Interns a stack; *added tells whether it is new. */
static uint32_t stack_put(struct store *st, const uint32_t *f, size_t n, bool *added)
{
	bool isnew;
	int64_t id = intern_put(st->smap, f, n * sizeof(*f), &isnew);

	if (id < 0)
		die("out of memory (stacks)");
	if (isnew) {
		while (st->nfr + n > st->capfr) {
			st->capfr = st->capfr ? st->capfr * 2 : 65536;
			st->fr = xrealloc(st->fr, st->capfr * sizeof(*st->fr));
		}
		GROW(st->soff, st->nst, st->capst);
		st->slen = xrealloc(st->slen, st->capst * sizeof(*st->slen));
		memcpy(st->fr + st->nfr, f, n * sizeof(*f));
		st->soff[st->nst] = (uint32_t)st->nfr;
		st->slen[st->nst] = (uint16_t)n;
		st->nfr += n;
		st->nst++;
	}
	if (added)
		*added = isnew;
	return (uint32_t)id;
}

/* ---------------------------------------------------------------------------
 * Chains: folded text to frame ids.
 */

static void seq_push(struct seq *q, uint32_t f, uint8_t mark)
{
	if (q->n < MAX_SEQ) {
		q->f[q->n] = f;
		q->mark[q->n] = mark;
		q->n++;
	}
}

static void seq_append(struct seq *q, const struct seq *from, size_t n)
{
	for (size_t i = 0; i < n && i < from->n; i++)
		seq_push(q, from->f[i], from->mark[i]);
}

/* One token of a chain: a frame (with %A and an optional rename applied) or $SYS(x). */
static void token_emit(struct gen *g, const char *tok, size_t len, const char *mod, int rename,
		       struct seq *q)
{
	char buf[WIRE_MAX_FRAME + 64];
	size_t o = 0;
	uint8_t mark = 0;

	if (len && tok[0] == '+') {
		mark = 1;
		tok++;
		len--;
	}
	if (len > 6 && memcmp(tok, "$SYS(", 5) == 0 && tok[len - 1] == ')') {
		int n = snprintf(buf, sizeof(buf), K "__x64_sys_%.*s", (int)(len - 6), tok + 5);
		seq_push(q, g->f_entry64, 0);
		seq_push(q, g->f_dosys64, 0);
		seq_push(q, frame_put(&g->st, buf, (size_t)n), mark);
		return;
	}
	for (size_t i = 0; i < len && o + 64 < sizeof(buf);) {
		if (tok[i] == '%' && i + 1 < len && tok[i + 1] == 'A') {
			size_t ml = strlen(mod);
			memcpy(buf + o, mod, ml);
			o += ml;
			i += 2;
			/* bugs past the built-in flavors get their own namespace */
			if (rename && i < len && tok[i] == '!' && strncmp(tok + i + 1, "std::", 5) != 0) {
				o += (size_t)snprintf(buf + o, sizeof(buf) - o, "!ext%d::", rename);
				i++;
			}
		} else {
			buf[o++] = tok[i++];
		}
	}
	seq_push(q, frame_put(&g->st, buf, o), mark);
}

/* Appends the frames of a chain; groups |...| repeat 1 to 4 times (never in a bug's core). */
static void chain_expand(struct gen *g, const char *spec, const char *mod, int rename, struct rng *r,
			 struct seq *q)
{
	struct { const char *p; size_t n; bool gs, ge; } tok[160];
	size_t nt = 0;
	const char *s = spec;

	while (*s && nt < 160) {
		const char *e = strchr(s, ';');
		size_t n = e ? (size_t)(e - s) : strlen(s);
		tok[nt].p = s;
		tok[nt].n = n;
		tok[nt].gs = n && s[0] == '|';
		tok[nt].ge = n > 1 && s[n - 1] == '|';
		if (tok[nt].gs) {
			tok[nt].p++;
			tok[nt].n--;
		}
		if (tok[nt].ge)
			tok[nt].n--;
		if (tok[nt].n)
			nt++;
		s += n;
		if (*s == ';')
			s++;
	}
	for (size_t i = 0; i < nt; i++) {
		size_t j = i, reps = 1;
		if (tok[i].gs) {
			while (j < nt && !tok[j].ge)
				j++;
			if (j == nt)
				j = nt - 1;
			reps = r ? 1 + (size_t)rng_below(r, 4) : 1;
		}
		for (size_t k = 0; k < reps; k++)
			for (size_t t = i; t <= j; t++)
				token_emit(g, tok[t].p, tok[t].n, mod, rename, q);
		i = j;
	}
}

/* ---------------------------------------------------------------------------
 * The i686 rewrite.
 */

static uint32_t frame_i686(struct gen *g, uint32_t f)
{
	struct store *st = &g->st;
	const char *s;
	static const char x64[] = K "__x64_sys_";

	if (st->falt[f] == -2) {
		/* frame_cstr() may grow st->falt: keep the result aside until it is done */
		int32_t alt = -1;
		s = frame_str(st, f);
		for (size_t i = 0; i < NWORDS(i686_subst); i++)
			if (strcmp(s, i686_subst[i][0]) == 0)
				alt = (int32_t)frame_cstr(st, i686_subst[i][1]);
		if (strncmp(s, x64, sizeof(x64) - 1) == 0) {
			const char *name = s + sizeof(x64) - 1;
			char buf[256];
			snprintf(buf, sizeof(buf), K "__ia32_sys_%s", name);
			for (size_t i = 0; i < NWORDS(i686_syscalls); i++)
				if (strcmp(name, i686_syscalls[i][0]) == 0)
					snprintf(buf, sizeof(buf), K "%s", i686_syscalls[i][1]);
			alt = (int32_t)frame_cstr(st, buf);
		}
		st->falt[f] = alt;
	}
	return st->falt[f] >= 0 ? (uint32_t)st->falt[f] : f;
}

static void seq_i686(struct gen *g, const struct seq *in, struct seq *out)
{
	out->n = 0;
	for (size_t i = 0; i < in->n; i++) {
		if (in->f[i] == g->f_entry64 && i + 2 < in->n && in->f[i + 1] == g->f_dosys64) {
			seq_push(out, g->f_vdso, 0);
			seq_push(out, g->f_entry32, 0);
			seq_push(out, g->f_sysenter32, 0);
			seq_push(out, g->f_fast32, 0);
			seq_push(out, g->f_dofast32, 0);
			seq_push(out, frame_i686(g, in->f[i + 2]), in->mark[i + 2]);
			i += 2;
		} else {
			seq_push(out, frame_i686(g, in->f[i]), in->mark[i]);
		}
	}
}

/* Interns q on both architectures. Returns false if the x86_64 stack already existed. */
static bool lstk_make(struct gen *g, const struct seq *q, struct lstk *out)
{
	struct seq alt;
	bool added;

	out->id[0] = stack_put(&g->st, q->f, q->n, &added);
	seq_i686(g, q, &alt);
	out->id[1] = stack_put(&g->st, alt.f, alt.n, NULL);
	return added;
}

static void pool_add(struct pool *p, struct lstk s)
{
	GROW(p->s, p->n, p->cap);
	p->s[p->n++] = s;
}

/* Popularity follows the pool order; shuffled first when generation order could bias it. */
static void pool_finish(struct pool *p, double zipf, struct rng *r)
{
	if (!p->n)
		die("internal: empty stack pool");
	for (size_t i = p->n - 1; r && i > 0; i--) {
		size_t j = (size_t)rng_below(r, i + 1);
		struct lstk t = p->s[i];
		p->s[i] = p->s[j];
		p->s[j] = t;
	}
	p->cdf = xcalloc(p->n, sizeof(*p->cdf));
	zipf_fill(p->cdf, p->n, zipf);
}

static void pool_release(struct pool *p)
{
	free(p->s);
	free(p->cdf);
}

/* A pool of one stack per chain, for threads whose behaviour is fixed. */
static void pool_from_chains(struct gen *g, struct app *a, struct pool *p, const char *const *chains,
			     size_t n, struct rng *r)
{
	struct seq q;
	struct lstk s;

	for (size_t i = 0; i < n; i++) {
		q.n = 0;
		chain_expand(g, chains[i], a->mod, 0, r, &q);
		lstk_make(g, &q, &s);
		pool_add(p, s);
	}
	pool_finish(p, 0.5, NULL);
}

/* ---------------------------------------------------------------------------
 * An app's code base: generated functions in a layered call graph.
 */

static void camel(char *dst, size_t cap, const char *w)
{
	snprintf(dst, cap, "%s", w);
	if (dst[0] >= 'a' && dst[0] <= 'z')
		dst[0] = (char)(dst[0] - 'a' + 'A');
}

static const char *pick_class(struct app *a, int ns, struct rng *r)
{
	return a->classes[ns][rng_below(r, (uint64_t)a->nclasses[ns])];
}

/* A plausible C++ or C function name in namespace ns, as module!function. */
static void fn_name(struct app *a, int ns, struct rng *r, char *out, size_t cap)
{
	const char *n = ns_words[ns], *cls = pick_class(a, ns, r);
	const char *v = verbs[rng_below(r, NWORDS(verbs))], *o = objs[rng_below(r, NWORDS(objs))];
	int ns2 = a->nsidx[rng_below(r, 14)];
	const char *n2 = ns_words[ns2], *cls2 = pick_class(a, ns2, r);
	char cv[32], co[32];
	uint64_t style = rng_below(r, 100);

	camel(cv, sizeof(cv), v);
	camel(co, sizeof(co), o);
	if (style < 38)
		snprintf(out, cap, "%s!%s::%s::%s_%s", a->mod, n, cls, v, o);
	else if (style < 52)
		snprintf(out, cap, "%s!%s::%s::%s%s", a->mod, n, cls, cv, co);
	else if (style < 60)
		snprintf(out, cap, "%s!%s::%s::%s", a->mod, n, cls, v);
	else if (style < 68)
		snprintf(out, cap, "lib%s_core.so!%s::%s<%s::%s>::%s_%s", a->mod, n, cls, n2, cls2, v, o);
	else if (style < 76) {
		switch (rng_below(r, 6)) {
		case 0:
			snprintf(out, cap, "%s!std::vector<%s::%s, std::allocator<%s::%s> >::_M_realloc_insert<"
				 "%s::%s const&>", a->mod, n, cls, n, cls, n, cls);
			break;
		case 1:
			snprintf(out, cap, "%s!std::unordered_map<std::string, %s::%s>::operator[]", a->mod, n,
				 cls);
			break;
		case 2:
			snprintf(out, cap, "%s!std::_Function_handler<void (%s::%s&), %s::%s::%s_%s()::"
				 "{lambda(%s::%s&)#1}>::_M_invoke", a->mod, n2, cls2, n, cls, v, o, n2, cls2);
			break;
		case 3:
			snprintf(out, cap, "%s!std::map<std::string, %s::%s>::find", a->mod, n, cls);
			break;
		case 4:
			snprintf(out, cap, "%s!std::__introsort_loop<__gnu_cxx::__normal_iterator<%s::%s*, "
				 "std::vector<%s::%s> >, long, __gnu_cxx::__ops::_Iter_comp_iter<%s::%s> >",
				 a->mod, n, cls, n, cls, n2, cls2);
			break;
		default:
			snprintf(out, cap, "%s!std::shared_ptr<%s::%s> std::make_shared<%s::%s, %s::%s&>(%s::%s&)",
				 a->mod, n, cls, n, cls, n2, cls2, n2, cls2);
		}
	} else if (style < 84)
		snprintf(out, cap, "%s!%s::%s::%s_%s()::{lambda()#1}::operator()() const", a->mod, n, cls, v,
			 o);
	else if (style < 94)
		snprintf(out, cap, "%s!%s_%s_%s", a->mod, n, v, o);
	else
		snprintf(out, cap, "%s!%s::detail::%s_%s_impl", a->mod, n, v, o);
}

static void add_callee(struct app *a, uint32_t c)
{
	GROW(a->callees, a->ncallees, a->capcallees);
	a->callees[a->ncallees++] = c;
}

/*
 * Callees of fns[i]: lo..hi functions one or two levels deeper. Of three random
 * candidates the least called is taken (then one of the caller's namespace), so
 * that every function of a level carries about the same share of the work and
 * no path of normal work outweighs an injected bug.
 */
static void pick_callees(struct app *a, uint32_t i, int lo, int hi, struct rng *r)
{
	struct fn *f = &a->fns[i];
	int want = (int)rng_range(r, lo, hi);

	f->callee0 = (uint32_t)a->ncallees;
	f->ncallees = 0;
	if (f->level + 1 >= a->nlevels)
		return;
	for (int k = 0; k < want * 4 && f->ncallees < want; k++) {
		int lvl = f->level + 1 + (f->level + 2 < a->nlevels && rng_chance(r, 0.2));
		uint32_t lo_i = a->lvl_start[lvl], n = a->lvl_start[lvl + 1] - lo_i, c = 0;
		bool dup = false;

		if (!n)
			continue;
		for (int t = 0; t < 3; t++) {
			uint32_t cand = lo_i + (uint32_t)rng_below(r, n);
			if (t == 0 || a->fanin[cand] < a->fanin[c] ||
			    (a->fanin[cand] == a->fanin[c] && a->fns[cand].ns == f->ns))
				c = cand;
		}
		for (int m = 0; m < f->ncallees; m++)
			dup |= a->callees[f->callee0 + (uint32_t)m] == c;
		if (dup)
			continue;
		add_callee(a, c);
		a->fanin[c]++;
		f->ncallees++;
	}
}

static int fn_level_cmp(const void *x, const void *y)
{
	const struct fn *a = x, *b = y;

	if (a->level != b->level)
		return a->level < b->level ? -1 : 1;
	return a->fid < b->fid ? -1 : a->fid > b->fid;
}

static void app_build_code(struct gen *g, struct app *a, struct rng *r)
{
	size_t nfn = (size_t)g->o.distinct / 3;
	int order[NWORDS(ns_words)];
	char name[WIRE_MAX_FRAME];

	/* deep enough that walks reach the deeper targets before running out of callees */
	a->nlevels = (int)(g->o.depth * 3 / 2 - 10);
	if (a->nlevels < 32)
		a->nlevels = 32;
	if (a->nlevels > 250)
		a->nlevels = 250;
	if (nfn < (size_t)a->nlevels * 24)
		nfn = (size_t)a->nlevels * 24;
	if (nfn > 8000)
		nfn = 8000;
	for (int i = 0; i < (int)NWORDS(ns_words); i++)
		order[i] = i;
	for (int i = (int)NWORDS(ns_words) - 1; i > 0; i--) {
		int j = (int)rng_below(r, (uint64_t)i + 1), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	for (int i = 0; i < 14; i++) {
		int ns = order[i];
		a->nsidx[i] = ns;
		a->nclasses[ns] = (int)rng_range(r, 3, 6);
		for (int c = 0; c < a->nclasses[ns]; c++)
			snprintf(a->classes[ns][c], sizeof(a->classes[ns][c]), "%s%s",
				 noun_a[rng_below(r, NWORDS(noun_a))], noun_b[rng_below(r, NWORDS(noun_b))]);
	}
	/* level 0 holds the route handlers, appended below */
	a->fns = xcalloc(nfn + MAX_ROUTES, sizeof(*a->fns));
	for (size_t i = 0; i < nfn; i++) {
		struct fn *f = &a->fns[a->nfns];
		size_t before = intern_count(g->st.fmap);
		int ns = a->nsidx[rng_below(r, 14)];

		for (int tries = 0; tries < 20; tries++) {
			fn_name(a, ns, r, name, sizeof(name));
			f->fid = frame_cstr(&g->st, name);
			if (intern_count(g->st.fmap) > before)
				break;
		}
		if (intern_count(g->st.fmap) == before)
			continue;
		/* the handlers' direct callees are many: request handling fans out at the top */
		f->level = (uint8_t)(rng_chance(r, 0.12) ? 1 : rng_range(r, 1, a->nlevels - 1));
		f->ns = (uint8_t)ns;
		f->rec = rng_chance(r, 0.03);
		if (f->level >= a->nlevels - 5 ? rng_chance(r, 0.9) : rng_chance(r, 0.3)) {
			f->nlibs = (uint8_t)rng_range(r, 1, 3);
			for (int k = 0; k < f->nlibs; k++)
				f->libs[k] = (uint16_t)rng_below(r, NLIBS);
		}
		a->nfns++;
	}
	for (int i = 0; i < a->nroutes; i++) {
		struct fn *f = &a->fns[a->nfns];
		f->fid = a->routes[i].handler_fid;
		f->level = 0;
		f->ns = (uint8_t)a->nsidx[0];
		a->nfns++;
	}
	qsort(a->fns, a->nfns, sizeof(*a->fns), fn_level_cmp);
	a->lvl_start = xcalloc((size_t)a->nlevels + 1, sizeof(*a->lvl_start));
	for (size_t i = 0, l = 0; l <= (size_t)a->nlevels; l++) {
		while (i < a->nfns && a->fns[i].level < l)
			i++;
		a->lvl_start[l] = (uint32_t)i;
	}
	a->fanin = xcalloc(a->nfns, sizeof(*a->fanin));
	for (uint32_t i = 0; i < a->nfns; i++) {
		if (a->fns[i].level == 0) {
			for (int k = 0; k < a->nroutes; k++)
				if (a->routes[k].handler_fid == a->fns[i].fid)
					a->routes[k].fn = i;
			pick_callees(a, i, 12, 18, r);
		} else {
			pick_callees(a, i, 2, 5, r);
		}
	}
	for (a->ntasks = 0; a->ntasks < 10; a->ntasks++) {
		uint32_t lo = a->lvl_start[1], n = a->lvl_start[4] - lo;
		a->tasks[a->ntasks] = lo + (uint32_t)rng_below(r, n);
	}
}

/* Target depth of one generated stack: around --depth, varying. */
static size_t target_depth(struct gen *g, struct rng *r)
{
	double d = (double)g->o.depth, u = 0;
	int64_t t;

	for (int i = 0; i < 4; i++)
		u += rng_unit(r);
	t = (int64_t)(d + (u - 2.0) * d * 0.45 + 0.5);
	if (t < 6)
		t = 6;
	if (t < (int64_t)(d / 3))
		t = (int64_t)(d / 3);
	if (t > MAX_DEPTH_T)
		t = MAX_DEPTH_T;
	return (size_t)t;
}

/* Thread entry frames; shallow targets keep the outermost two and the innermost few. */
static void push_prefix(struct seq *q, const struct seq *pre, size_t target)
{
	size_t n = pre->n, keep = target > 6 ? target - 4 : 2;

	if (n <= keep) {
		seq_append(q, pre, n);
		return;
	}
	seq_push(q, pre->f[0], 0);
	seq_push(q, pre->f[1], 0);
	for (size_t i = n - (keep - 2); i < n; i++)
		seq_push(q, pre->f[i], 0);
}

static void push_fn(struct app *a, uint32_t i, struct seq *q, size_t target, struct rng *r)
{
	size_t reps = a->fns[i].rec ? (size_t)rng_range(r, 2, 5) : 1;

	for (size_t k = 0; k < reps && (k == 0 || q->n < target); k++)
		seq_push(q, a->fns[i].fid, 0);
}

static uint32_t pick_callee(struct app *a, uint32_t i, struct rng *r)
{
	const struct fn *f = &a->fns[i];
	double w = 0, u;

	/* a handler spreads its work evenly; deeper down, earlier callees are the
	 * hot ones (weights 1/sqrt(k+1)), so no single path dominates a fleet */
	if (f->level < 2)
		return a->callees[f->callee0 + (uint32_t)rng_below(r, f->ncallees)];
	for (int k = 0; k < f->ncallees; k++)
		w += 1.0 / sqrt(k + 1.0);
	u = rng_unit(r) * w;
	for (int k = 0; k < f->ncallees; k++) {
		u -= 1.0 / sqrt(k + 1.0);
		if (u < 0)
			return a->callees[f->callee0 + (uint32_t)k];
	}
	return a->callees[f->callee0 + f->ncallees - 1u];
}

/* Walks down the call graph from fns[i] for at most `levels` calls or to `target` frames. */
static uint32_t walk(struct app *a, uint32_t i, struct seq *q, size_t levels, size_t target,
		     struct rng *r)
{
	for (size_t k = 0; k < levels && q->n < target && a->fns[i].ncallees; k++) {
		i = pick_callee(a, i, r);
		push_fn(a, i, q, target, r);
	}
	return i;
}

/* Appends a library chain, cut to at most `room` frames (a sample inside the chain). */
static void push_lib(struct gen *g, struct app *a, const char *chain, struct seq *q, size_t room,
		     struct rng *r)
{
	struct seq c;

	c.n = 0;
	chain_expand(g, chain, a->mod, 0, r, &c);
	if (room < 1)
		room = 1;
	seq_append(q, &c, c.n < room ? c.n : room);
}

/* A running stack below fns[start], aiming at depth `target`. */
static void run_path(struct gen *g, struct app *a, uint32_t start, struct seq *q, size_t target,
		     struct rng *r)
{
	uint32_t i = start;

	for (;;) {
		const struct fn *f = &a->fns[i];
		size_t rem = q->n < target ? target - q->n : 0;

		if (!rem)
			break;
		if (f->nlibs) {
			/* into a library when its chain about fills the room left (cut by at
			 * most 4 frames, so that long chains are not favoured), or now and then */
			uint16_t lib = f->libs[rng_below(r, f->nlibs)];
			size_t len = g->lib_len[lib];
			if ((len >= rem && len <= rem + 4) || !f->ncallees || rng_chance(r, 0.02)) {
				push_lib(g, a, lib_chains[lib], q, rem, r);
				break;
			}
		}
		if (!f->ncallees) {
			/* a leaf with room left: it calls into a library (anything can malloc) */
			if (rem > 3)
				push_lib(g, a, lib_chains[rng_below(r, NLIBS)], q, rem, r);
			break;
		}
		if (rem <= 2 && rng_chance(r, 0.2))
			break;
		i = pick_callee(a, i, r);
		push_fn(a, i, q, target, r);
	}
	if (rng_chance(r, 0.01))    /* now and then the sample lands in a page fault */
		push_lib(g, a, PAGE_FAULT, q, 6 + rng_below(r, 5), r);
}

static void route_head(struct app *a, int ri, struct seq *q, size_t target)
{
	q->n = 0;
	push_prefix(q, &a->loop_prefix, target);
	seq_push(q, a->routes[ri].wrap_fid, 0);
	seq_push(q, a->routes[ri].handler_fid, 0);
}

/*
 * Normal work through the caller of a bug's slow path: in real code the
 * functions that reach a slow path are ordinary ones that do other things most
 * of the time (a promotions step calls many rules, one of which recompiles its
 * regex), so their frames are common across the fleet and only the slow path
 * below them is rare. A few levels of the route's code, the caller chain, then
 * normal code below an arbitrary function.
 */
static void via_bug_caller(struct gen *g, struct app *a, uint32_t route_fn, const struct bug *b, int c,
			   struct seq *q, size_t target, struct rng *r)
{
	walk(a, route_fn, q, (size_t)rng_range(r, 0, 4), target, r);
	chain_expand(g, b->fl->callers[c], a->mod, b->rename, r, q);
	run_path(g, a, (uint32_t)rng_below(r, a->nfns), q, target, r);
}

static void app_build_pools(struct gen *g, struct app *a, struct rng *r)
{
	struct seq q;
	struct lstk s;
	size_t D = (size_t)g->o.distinct, tw = 0;
	struct { const struct bug *b; int c; } callers[MAX_BUGS * MAX_CALLERS];
	uint64_t ncallers = 0;

	for (int64_t i = 0; i < g->o.bugs; i++)
		if (&g->apps[g->bugs[i].app] == a)
			for (int c = 0; c < g->bugs[i].ncallers; c++) {
				callers[ncallers].b = &g->bugs[i];
				callers[ncallers++].c = c;
			}

	for (int i = 0; i < a->nroutes; i++)
		tw += (size_t)a->routes[i].spec->weight;
	for (int ri = 0; ri < a->nroutes; ri++) {
		struct route *rt = &a->routes[ri];
		size_t want = D * 80 / 100 * (size_t)rt->spec->weight / tw;
		size_t nwait = 6 + D / 100 / (size_t)a->nroutes, nhand = 3 + D / 250 / (size_t)a->nroutes;

		if (want < 20)
			want = 20;
		for (size_t tries = 0; rt->run.n < want && tries < want * 20; tries++) {
			size_t t = target_depth(g, r);
			route_head(a, ri, &q, t);
			if (ncallers && rng_chance(r, 0.08)) {
				uint64_t k = rng_below(r, ncallers);
				via_bug_caller(g, a, rt->fn, callers[k].b, callers[k].c, &q, t, r);
			} else
				run_path(g, a, rt->fn, &q, t, r);
			if (lstk_make(g, &q, &s))
				pool_add(&rt->run, s);
		}
		for (size_t tries = 0; rt->wait.n < nwait && tries < nwait * 20; tries++) {
			route_head(a, ri, &q, 24);
			walk(a, rt->fn, &q, (size_t)rng_range(r, 1, 5), MAX_DEPTH_T, r);
			chain_expand(g, route_wait_chains[rng_below(r, NWORDS(route_wait_chains))], a->mod, 0,
				     r, &q);
			if (lstk_make(g, &q, &s))
				pool_add(&rt->wait, s);
		}
		for (size_t tries = 0; rt->handoff.n < nhand && tries < nhand * 20; tries++) {
			route_head(a, ri, &q, 24);
			walk(a, rt->fn, &q, (size_t)rng_range(r, 1, 4), MAX_DEPTH_T, r);
			chain_expand(g, handoff_chain, a->mod, 0, r, &q);
			if (lstk_make(g, &q, &s))
				pool_add(&rt->handoff, s);
		}
		pool_finish(&rt->run, 0.9, r);
		pool_finish(&rt->wait, 0.8, r);
		pool_finish(&rt->handoff, 0.8, r);
	}
	{
		size_t want = D * 16 / 100;
		if (want < 20)
			want = 20;
		for (size_t tries = 0; a->worker_run.n < want && tries < want * 20; tries++) {
			size_t t = target_depth(g, r);
			uint32_t task = a->tasks[rng_below(r, (uint64_t)a->ntasks)];
			q.n = 0;
			push_prefix(&q, &a->worker_prefix, t);
			seq_push(&q, a->fns[task].fid, 0);
			run_path(g, a, task, &q, t, r);
			if (lstk_make(g, &q, &s))
				pool_add(&a->worker_run, s);
		}
		pool_finish(&a->worker_run, 0.9, r);
	}
	pool_from_chains(g, a, &a->worker_idle, (const char *const[]){ worker_idle_chain }, 1, r);
	pool_from_chains(g, a, &a->loop_idle, (const char *const[]){ loop_idle_chain }, 1, r);
	pool_from_chains(g, a, &a->main_wait, (const char *const[]){ main_wait_chain }, 1, r);
	pool_from_chains(g, a, &a->gc_run, gc_run_chains, NWORDS(gc_run_chains), r);
	pool_from_chains(g, a, &a->gc_wait, gc_wait_chains, NWORDS(gc_wait_chains), r);
	pool_from_chains(g, a, &a->timer_run, timer_run_chains, NWORDS(timer_run_chains), r);
	pool_from_chains(g, a, &a->timer_wait, timer_wait_chains, NWORDS(timer_wait_chains), r);
	pool_from_chains(g, a, &a->io_run, io_run_chains, NWORDS(io_run_chains), r);
	pool_from_chains(g, a, &a->io_sync, io_sync_chains, NWORDS(io_sync_chains), r);
	pool_from_chains(g, a, &a->io_idle, io_idle_chains, NWORDS(io_idle_chains), r);
}

static void app_init(struct gen *g, struct app *a, const char *name, int idx)
{
	const struct app_spec *spec = &generic_app;
	double acc = 0;

	for (size_t i = 0; i < NWORDS(known_apps); i++)
		if (strcmp(known_apps[i].name, name) == 0)
			spec = &known_apps[i];
	a->spec = spec;
	a->idx = idx;
	snprintf(a->name, sizeof(a->name), "%s", name);
	snprintf(a->mod, sizeof(a->mod), "%s", name);
	snprintf(a->host_prefix, sizeof(a->host_prefix), "%.20s", spec->host_prefix ? spec->host_prefix : name);
	a->nversions = spec->nversions;
	for (int v = 0; v < a->nversions; v++) {
		acc += spec->vweights[v];
		a->version_cdf[v] = acc;
	}
	a->nroutes = spec->nroutes;
	acc = 0;
	for (int i = 0; i < a->nroutes; i++) {
		char buf[WIRE_MAX_FRAME];
		struct route *rt = &a->routes[i];

		rt->spec = &spec->routes[i];
		acc += rt->spec->weight;
		a->route_cdf[i] = acc;
		snprintf(buf, sizeof(buf), "%s!std::_Function_handler<void (http::Request&, http::Response&), "
			 "http::Router::bind<handlers::%s>()::{lambda(http::Request&, http::Response&)#1}>::"
			 "_M_invoke(std::_Any_data const&, http::Request&, http::Response&)", a->mod,
			 rt->spec->handler);
		rt->wrap_fid = frame_cstr(&g->st, buf);
		snprintf(buf, sizeof(buf), "%s!handlers::%s::handle(http::Request&, http::Response&)", a->mod,
			 rt->spec->handler);
		rt->handler_fid = frame_cstr(&g->st, buf);
	}
	chain_expand(g, LOOP_PREFIX, a->mod, 0, NULL, &a->loop_prefix);
	chain_expand(g, WORKER_PREFIX, a->mod, 0, NULL, &a->worker_prefix);
}

/* ---------------------------------------------------------------------------
 * Bugs.
 */

static void bug_init(struct gen *g, struct bug *b, int id, int used[MAX_APPS][NTYPES][3])
{
	struct app *a;
	int flavor, n;
	struct seq q;
	char name[sizeof(b->name)];

	b->id = id;
	b->type = id % NTYPES;
	b->app = id % g->napps;
	a = &g->apps[b->app];
	flavor = (id / NTYPES + b->app) % 3;
	n = used[b->app][b->type][flavor]++;
	b->rename = n ? n + 1 : 0;
	b->fl = &flavors[b->type][flavor];
	/* through a local buffer: source and destination both live in *g */
	if (b->rename)
		snprintf(name, sizeof(name), "%s/%s-%d", a->name, b->fl->name, b->rename);
	else
		snprintf(name, sizeof(name), "%s/%s", a->name, b->fl->name);
	memcpy(b->name, name, sizeof(b->name));
	b->fraction = type_params[b->type].fraction * (id < NTYPES ? 1.0 : 0.5);
	b->version = b->type == B_REGRESSION ? (a->nversions > 1 ? 1 : 0) : -1;
	b->ncallers = b->fl->callers[1] ? 2 : 1;
	b->nvariants = b->type == B_ARCH32 ? 2 : b->ncallers;

	/* intern the bug's own frames before the code base is generated, so that
	 * no generated function can take one of their names */
	q.n = 0;
	chain_expand(g, b->fl->core, a->mod, b->rename, NULL, &q);
	for (size_t i = 0; i < q.n; i++)
		if (q.mark[i] && b->nframes < 64 && b->type != B_CONVOY)
			b->frames[b->nframes++] = q.f[i];
		else if (q.mark[i] && b->nwframes < 64 && b->type == B_CONVOY)
			b->wframes[b->nwframes++] = q.f[i];
	for (int c = 0; c < b->ncallers; c++) {
		q.n = 0;
		chain_expand(g, b->fl->callers[c], a->mod, b->rename, NULL, &q);
	}
	for (int t = 0; t < 5 && b->fl->tails[t]; t++) {
		q.n = 0;
		chain_expand(g, b->fl->tails[t], a->mod, b->rename, NULL, &q);
	}
	if (b->type == B_CONVOY) {
		q.n = 0;
		chain_expand(g, b->fl->holder, a->mod, b->rename, NULL, &q);
		for (size_t i = 0; i < q.n; i++)
			if (q.mark[i] && b->nframes < 64)
				b->frames[b->nframes++] = q.f[i];
		for (int t = 0; t < 4 && b->fl->holder_tails[t]; t++) {
			q.n = 0;
			chain_expand(g, b->fl->holder_tails[t], a->mod, b->rename, NULL, &q);
		}
	}
}

/* The frames that identify one variant: its caller path plus the signature
 * (for the 32-bit variant, the whole core as it is on that architecture). */
static void bug_variants(struct gen *g, struct bug *b)
{
	struct app *a = &g->apps[b->app];
	struct seq q, alt;

	for (int v = 0; v < b->nvariants; v++) {
		struct variant *var = &b->var[v];
		const struct seq *src = &q;
		size_t ncaller;

		var->caller = b->type == B_ARCH32 ? 0 : v;
		var->arch = b->type == B_ARCH32 ? v : -1;
		q.n = 0;
		chain_expand(g, b->fl->callers[var->caller], a->mod, b->rename, NULL, &q);
		ncaller = q.n;
		for (size_t i = 0; i < q.n; i++)
			q.mark[i] = 1;
		chain_expand(g, b->fl->core, a->mod, b->rename, NULL, &q);
		if (var->arch == 1) {
			seq_i686(g, &q, &alt);
			src = &alt;
		}
		var->nframes = 0;
		for (size_t i = 0; i < src->n; i++)
			if (src->mark[i] || b->type == B_ARCH32)
				var->frames[var->nframes++] = src->f[i];
		if (b->type == B_ARCH32) {
			snprintf(var->name, sizeof(var->name), "%s hosts", v ? "i686" : "x86_64");
			snprintf(var->when, sizeof(var->when), "arch=%s", v ? "i686" : "x86_64");
		} else {
			snprintf(var->name, sizeof(var->name), "called from %s", frame_str(&g->st, q.f[ncaller - 1]));
			snprintf(var->when, sizeof(var->when), "caller=%d", v);
		}
	}
}

static void bug_build_pools(struct gen *g, struct bug *b, struct rng *r)
{
	struct app *a = &g->apps[b->app];
	struct seq q, tail;
	struct lstk s;
	int ntails = 0;

	while (ntails < 5 && b->fl->tails[ntails])
		ntails++;
	for (int c = 0; c < b->ncallers; c++) {
		for (int ri = 0; ri < a->nroutes; ri++) {
			struct pool *p = &b->pools[c][ri];
			size_t want = (size_t)rng_range(r, 10, 24);
			/* One or two call paths from the route's handler down to the caller,
			 * as in real code, where a function is called from a few places; the
			 * stacks differ below the slow path (where the samples land). The
			 * paths are as long as normal stacks are deep. */
			struct seq path[2];
			int npaths = 1 + (int)rng_below(r, 2);

			for (int k = 0; k < npaths; k++) {
				size_t t = target_depth(g, r), room;

				tail.n = 0;
				chain_expand(g, b->fl->callers[c], a->mod, b->rename, r, &tail);
				chain_expand(g, b->fl->core, a->mod, b->rename, NULL, &tail);
				route_head(a, ri, &path[k], t);
				room = t > path[k].n + tail.n + 2 ? t - path[k].n - tail.n - 2 : 0;
				walk(a, a->routes[ri].fn, &path[k], room ? room : (size_t)rng_range(r, 0, 1),
				     MAX_DEPTH_T, r);
			}
			for (size_t tries = 0; p->n < want && tries < want * 20; tries++) {
				q = path[rng_below(r, (uint64_t)npaths)];
				tail.n = 0;
				chain_expand(g, b->fl->callers[c], a->mod, b->rename, r, &tail);
				chain_expand(g, b->fl->core, a->mod, b->rename, NULL, &tail);
				if (ntails && (type_params[b->type].wait || rng_chance(r, 0.85)))
					chain_expand(g, b->fl->tails[rng_below(r, (uint64_t)ntails)], a->mod,
						     b->rename, r, &tail);
				seq_append(&q, &tail, tail.n);
				if (lstk_make(g, &q, &s))
					pool_add(p, s);
			}
			pool_finish(p, 0.6, r);
		}
	}
	if (b->type == B_CONVOY) {
		for (size_t tries = 0; b->holder.n < 8 && tries < 200; tries++) {
			const char *htail = b->fl->holder_tails[rng_below(r, 4)];
			q.n = 0;
			chain_expand(g, b->fl->holder, a->mod, b->rename, r, &q);
			if (htail && *htail)
				chain_expand(g, htail, a->mod, b->rename, r, &q);
			if (lstk_make(g, &q, &s))
				pool_add(&b->holder, s);
		}
		pool_finish(&b->holder, 0.5, r);
	}
}

/* ---------------------------------------------------------------------------
 * The fleet.
 */

static void hosts_build(struct gen *g)
{
	static const char *const oses[][2] = {
		{ "debian-11", "5.10.0-28-amd64" },
		{ "ubuntu-20.04", "5.4.0-172-generic" },
		{ "rhel-8.8", "4.18.0-477.27.1.el8_8.x86_64" },
	};
	static const char *const regions[] = { "eu-west-1", "us-east-1", "us-west-2", "ap-south-1" };
	static const int cpus[] = { 4, 8, 16 };
	struct rng r;
	int counts[MAX_APPS] = { 0 };

	rng_init(&r, g->o.seed, RNG_HOSTS, 0);
	g->nhosts = (int)g->o.hosts;
	g->hosts = xcalloc((size_t)g->nhosts, sizeof(*g->hosts));
	for (int i = 0; i < g->napps; i++)
		g->apps[i].hosts = xcalloc((size_t)g->nhosts / (size_t)g->napps + 1, sizeof(int));
	for (int i = 0; i < g->nhosts; i++) {
		struct host *h = &g->hosts[i];
		struct app *a = &g->apps[i % g->napps];
		int j = counts[a->idx]++, os = (int)rng_below(&r, 3);

		h->app = a->idx;
		snprintf(h->name, sizeof(h->name), "%s-%03d", a->host_prefix, j + 1);
		/* every version and both architectures exist as soon as there are hosts for them */
		if (j < a->nversions)
			h->version = j;
		else
			h->version = (int)cdf_pick(a->version_cdf, (size_t)a->nversions, &r);
		h->arch = j == 1 ? 1 : j == 0 ? 0 : rng_chance(&r, 0.25);
		h->os = oses[os][0];
		h->kernel = oses[os][1];
		h->region = regions[rng_below(&r, 4)];
		h->tier = h->version == a->nversions - 1 && rng_chance(&r, 0.5) ? "canary" : "prod";
		h->cpus = h->arch ? 4 : cpus[rng_below(&r, 3)];
		h->workers = rng_chance(&r, 0.5) ? 4 : 8;
		h->loops = h->cpus >= 8 ? 4 : 3;
		h->db_pool = rng_chance(&r, 0.5) ? 16 : 32;
		h->period = rng_chance(&r, 0.75) ? 1 * MS : 10 * MS;
		h->clock = rng_range(&r, 7200LL * 1000 * MS, 40LL * 86400 * 1000 * MS);
		h->pid = rng_range(&r, 900, 4000000);
		snprintf(h->cpus_s, sizeof(h->cpus_s), "%d", h->cpus);
		snprintf(h->workers_s, sizeof(h->workers_s), "%d", h->workers);
		snprintf(h->db_pool_s, sizeof(h->db_pool_s), "%d", h->db_pool);
		snprintf(h->hz_s, sizeof(h->hz_s), "%d", (int)(1000 * MS / h->period));
		h->labels[0] = (struct wire_label){ "os", h->os };
		h->labels[1] = (struct wire_label){ "kernel", h->kernel };
		h->labels[2] = (struct wire_label){ "region", h->region };
		h->labels[3] = (struct wire_label){ "arch", h->arch ? "i686" : "x86_64" };
		h->labels[4] = (struct wire_label){ "cpus", h->cpus_s };
		h->labels[5] = (struct wire_label){ "tier", h->tier };
		h->labels[6] = (struct wire_label){ "conf.worker_threads", h->workers_s };
		h->labels[7] = (struct wire_label){ "conf.db_pool", h->db_pool_s };
		h->labels[8] = (struct wire_label){ "profiler.hz", h->hz_s };
		h->nlabels = 9;
		a->hosts[a->nhosts++] = i;
	}
	for (int i = 0; i < g->napps; i++) {
		struct app *a = &g->apps[i];
		for (int v = 0; v < a->nversions; v++)
			for (int arch = 0; arch < 2; arch++) {
				unsigned char raw[20];
				for (int k = 0; k < 20; k++)
					raw[k] = (unsigned char)rng_next(&r);
				util_hex(raw, sizeof(raw), a->build_ids[v][arch]);
			}
	}
}

static void pool_mark_use(struct gen *g, const struct pool *p)
{
	for (size_t j = 0; j < p->n; j++)
		for (int arch = 0; arch < 2; arch++) {
			uint32_t s = p->s[j].id[arch];
			for (uint32_t k = 0; k < g->st.slen[s]; k++)
				g->st.fuse[g->st.fr[g->st.soff[s] + k]] |= (uint8_t)(1 << arch);
		}
}

static void gen_setup(struct gen *g)
{
	static const char *const fixed[] = {
		K "entry_SYSCALL_64_after_hwframe", K "do_syscall_64", "[vdso]!__kernel_vsyscall",
		K "entry_SYSENTER_compat_after_hwframe", K "do_SYSENTER_32", K "do_fast_syscall_32",
		K "__do_fast_syscall_32",
	};
	uint32_t ids[7];
	int used[MAX_APPS][NTYPES][3];
	struct rng r;
	char list[512], *save = NULL, *tok;

	g->st.fmap = intern_open(0);
	g->st.smap = intern_open(0);
	if (!g->st.fmap || !g->st.smap)
		die("out of memory");
	for (int i = 0; i < 7; i++)
		ids[i] = frame_cstr(&g->st, fixed[i]);
	g->f_entry64 = ids[0];
	g->f_dosys64 = ids[1];
	g->f_vdso = ids[2];
	g->f_entry32 = ids[3];
	g->f_sysenter32 = ids[4];
	g->f_fast32 = ids[5];
	g->f_dofast32 = ids[6];

	for (size_t i = 0; i < NLIBS; i++) {
		struct seq q;
		q.n = 0;
		chain_expand(g, lib_chains[i], "", 0, NULL, &q);
		g->lib_len[i] = q.n;
	}
	snprintf(list, sizeof(list), "%s", g->o.apps);
	/* main() has checked the list: names, count, no repeats */
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		app_init(g, &g->apps[g->napps], tok, g->napps);
		g->napps++;
	}

	memset(used, 0, sizeof(used));
	g->nbugs = (int)g->o.bugs;
	for (int i = 0; i < g->nbugs; i++)
		bug_init(g, &g->bugs[i], i, used);
	for (int i = 0; i < g->napps; i++) {
		rng_init(&r, g->o.seed, RNG_APP, (uint64_t)i);
		app_build_code(g, &g->apps[i], &r);
		app_build_pools(g, &g->apps[i], &r);
	}
	for (int i = 0; i < g->nbugs; i++) {
		rng_init(&r, g->o.seed, RNG_BUG, (uint64_t)i);
		bug_variants(g, &g->bugs[i]);
		bug_build_pools(g, &g->bugs[i], &r);
	}
	hosts_build(g);

	/* which frames each architecture can show */
	for (int i = 0; i < g->napps; i++) {
		struct app *a = &g->apps[i];
		const struct pool *pools[] = { &a->worker_run, &a->worker_idle, &a->loop_idle, &a->main_wait,
					       &a->gc_run, &a->gc_wait, &a->timer_run, &a->timer_wait,
					       &a->io_run, &a->io_sync, &a->io_idle };
		for (size_t k = 0; k < NWORDS(pools); k++)
			pool_mark_use(g, pools[k]);
		for (int ri = 0; ri < a->nroutes; ri++) {
			pool_mark_use(g, &a->routes[ri].run);
			pool_mark_use(g, &a->routes[ri].wait);
			pool_mark_use(g, &a->routes[ri].handoff);
		}
	}
	for (int i = 0; i < g->nbugs; i++) {
		for (int c = 0; c < MAX_CALLERS; c++)
			for (int ri = 0; ri < MAX_ROUTES; ri++)
				pool_mark_use(g, &g->bugs[i].pools[c][ri]);
		pool_mark_use(g, &g->bugs[i].holder);
	}

	g->smap = xcalloc(g->st.nst, sizeof(*g->smap));
	g->fmap = xcalloc(intern_count(g->st.fmap), sizeof(*g->fmap));
	memset(g->smap, 0xff, g->st.nst * sizeof(*g->smap));
	memset(g->fmap, 0xff, intern_count(g->st.fmap) * sizeof(*g->fmap));
	g->touched_s = xcalloc(g->st.nst, sizeof(*g->touched_s));
	g->touched_f = xcalloc(intern_count(g->st.fmap), sizeof(*g->touched_f));
	g->pool_mark = xcalloc(g->st.nst, sizeof(*g->pool_mark));
	g->stack_seen = xcalloc(g->st.nst, 1);
	g->frame_seen = xcalloc(intern_count(g->st.fmap), 1);
	g->st_min_stacks = SIZE_MAX;
	zipf_fill(g->ws_cdf, WS_MAX, 0.7);
}

/* ---------------------------------------------------------------------------
 * One stream: a bad-performance episode on one host, built thread by thread.
 * Each thread has a cursor (busy) and its events are laid out forward in time,
 * so that a thread never runs two events at once. Small gaps keep events that
 * are not related from touching, because spans are closed intervals and a
 * touching event would join the wait graph.
 */

#define GAP (5 * US)        /* between consecutive events of the symptom thread */
#define MINEV (50 * US)     /* the least time an event and its gap take when filling */

static int thr_add(struct sbuild *b, int64_t tid, int role)
{
	struct thr *t = &b->th[b->nth];

	t->tid = tid;
	t->role = role;
	t->busy = b->T0 + rng_range(&b->r, 0, 3 * MS);
	return b->nth++;
}

static void ev_add(struct sbuild *b, int th, int kind, int64_t ts, int64_t dur, uint32_t stack,
		   int64_t readier, int tag)
{
	struct thr *t = &b->th[th];
	struct ev *e;

	if (ts < t->busy || dur < 0)
		die("internal: stream %u, thread %lld: event at %lld overlaps (busy until %lld)", b->index,
		    (long long)t->tid, (long long)ts, (long long)t->busy);
	GROW(b->ev, b->nev, b->cap);
	e = &b->ev[b->nev++];
	e->tid = t->tid;
	e->ts = ts;
	e->dur = dur;
	e->readier = kind == WIRE_WAIT ? readier : 0;
	e->stack = stack;
	e->seq = b->seq++;
	e->kind = (uint8_t)kind;
	e->th = (uint8_t)th;
	e->tag = (uint8_t)tag;
	t->busy = ts + dur;
}

static void ws_build(struct sbuild *b, struct ws *w, const struct pool *p, size_t want, uint32_t mark,
		     const double *cdf)
{
	w->pool = p;
	w->n = 0;
	if (want > p->n)
		want = p->n;
	if (want > WS_MAX)
		want = WS_MAX;
	for (size_t tries = 0; w->n < want && tries < want * 8; tries++) {
		size_t i = cdf_pick(p->cdf, p->n, &b->r);
		uint32_t sid = p->s[i].id[0];
		if (b->g->pool_mark[sid] == mark)
			continue;
		b->g->pool_mark[sid] = mark;
		w->idx[w->n++] = (uint32_t)i;
	}
	memcpy(w->cdf, cdf, w->n * sizeof(*cdf));
	for (size_t k = 0, i = 0; k < WS_MAX; k++) {
		double x = w->cdf[w->n - 1] * (double)k / WS_MAX;
		while (i + 1 < w->n && w->cdf[i] <= x)
			i++;
		w->guide[k] = (uint16_t)i;
	}
}

/* A draw from a working set: the same index as cdf_pick(), in constant expected time
 * (most of a stream's events are drawn here). */
static size_t ws_pick(const struct ws *w, struct rng *r)
{
	double u = rng_unit(r), x = u * w->cdf[w->n - 1];
	size_t i = w->guide[(size_t)(u * WS_MAX)];

	while (w->cdf[i] <= x)
		i++;
	return i;
}

/* n back-to-back CPU samples from ts; returns the end of the last. */
static int64_t runs_add(struct sbuild *b, int th, int64_t ts, int64_t n, const struct ws *w,
			const struct pool *p, int tag)
{
	for (int64_t i = 0; i < n; i++) {
		uint32_t s = w ? w->pool->s[w->idx[ws_pick(w, &b->r)]].id[b->arch]
			       : p->s[cdf_pick(p->cdf, p->n, &b->r)].id[b->arch];
		ev_add(b, th, WIRE_RUN, ts + i * b->p, b->p, s, 0, tag);
	}
	return ts + n * b->p;
}

static uint32_t pick(struct sbuild *b, const struct pool *p)
{
	return p->s[cdf_pick(p->cdf, p->n, &b->r)].id[b->arch];
}

static int64_t ms_scaled(struct sbuild *b, double lo, double hi)
{
	return (int64_t)(rng_uniform(&b->r, lo, hi) * (double)MS * b->scale);
}

/* CPU samples standing for about `ns` of running, at least `min`. */
static int64_t samples(struct sbuild *b, int64_t ns, int64_t min)
{
	int64_t n = (ns + b->p / 2) / b->p;

	return n < min ? min : n;
}

static int64_t random_loop_tid(struct sbuild *b, bool with_st)
{
	uint64_t n = (uint64_t)b->nloops + with_st;
	uint64_t i = rng_below(&b->r, n);

	if (!n)
		return 0;
	return i < (uint64_t)b->nloops ? b->th[b->loops[i]].tid : b->th[b->st].tid;
}

/*
 * The ordinary life of a thread: exactly k events from its cursor on, spread to
 * end near `to`; with `hard`, never after it (the caller leaves room for k events).
 */
static void fill(struct sbuild *b, int th, int64_t to, int64_t k, bool hard)
{
	struct thr *t = &b->th[th];
	struct app *a = b->a;
	int64_t p = b->p, tt = t->busy + rng_range(&b->r, 1 * US, 20 * US);

	while (k > 0) {
		const struct pool *idle, *runp = NULL, *secp = NULL;
		const struct ws *runw = NULL;
		int64_t readier = 0, left = to - tt, nb, sec = 0, secdur = 0, w, cycles, rest;
		int rr = (int)rng_below(&b->r, (uint64_t)a->nroutes);

		switch (t->role) {
		case R_WORKER:
			idle = &a->worker_idle;
			readier = random_loop_tid(b, false);
			runw = &b->wsw;
			nb = samples(b, ms_scaled(b, 2, 20), 1);
			break;
		case R_GC:
			idle = &a->gc_wait;
			runp = &a->gc_run;
			nb = samples(b, ms_scaled(b, 3, 25), 1);
			break;
		case R_TIMER:
			idle = &a->timer_wait;
			runp = &a->timer_run;
			nb = rng_range(&b->r, 0, 2);
			break;
		case R_IO:
			idle = &a->io_idle;
			readier = random_loop_tid(b, true);
			runp = &a->io_run;
			nb = rng_range(&b->r, 1, 2);
			secp = &a->io_sync;
			sec = 1;
			secdur = rng_range(&b->r, 1 * MS, 30 * MS);
			break;
		case R_MAIN:
			idle = &a->main_wait;
			nb = 0;
			break;
		default:
			idle = &a->loop_idle;
			runw = &b->wsr[rr];
			nb = samples(b, ms_scaled(b, 1, 12), 1);
			if (b->g->o.wait_share > 0) {
				/* a cycle is 1.3 waits and nb runs: nb is 0 or 1 at the odds that give the share */
				double q = 1.3 * (1 - b->g->o.wait_share) / b->g->o.wait_share;
				nb = q >= 1 ? (int64_t)q + rng_chance(&b->r, q - (double)(int64_t)q)
					    : rng_chance(&b->r, q);
			}
			if (rng_chance(&b->r, 0.3)) {
				secp = &a->routes[rr].wait;
				sec = 1;
				secdur = max64(20 * US, ms_scaled(b, 0.2, 2.5));
			}
		}
		if (k == 1) {
			int64_t d = left > 2 * US ? left : rng_range(&b->r, 1 * MS, 30 * MS);
			if (hard)
				d = max64(1, left);
			ev_add(b, th, WIRE_WAIT, tt, d, pick(b, idle), readier, 0);
			break;
		}
		if (nb > k - 1)
			nb = k - 1;
		if (sec && nb + 2 > k)
			sec = 0;
		cycles = k / (nb + 1 + sec);
		if (cycles < 1)
			cycles = 1;
		w = (left - cycles * (nb * p + secdur)) / cycles;
		w = (int64_t)((double)w * rng_uniform(&b->r, 0.5, 1.5));
		if (hard) {
			rest = (k - 1 - nb - sec) * MINEV;
			while (sec && 2 * MINEV + nb * p + secdur + rest > left) {
				sec = 0;
				secdur = 0;
				rest += MINEV;
			}
			while (nb > 0 && 2 * MINEV + nb * p + rest > left) {
				nb--;
				rest += MINEV;
			}
			w = min64(w, left - nb * p - secdur - rest - 2 * MINEV);
		} else if (w < 2 * US) {
			w = rng_range(&b->r, 20 * US, 2 * MS);
		}
		if (w < 2 * US)
			w = 2 * US;
		ev_add(b, th, WIRE_WAIT, tt, w, pick(b, idle), readier, 0);
		tt += w + rng_range(&b->r, 1 * US, 20 * US);
		tt = runs_add(b, th, tt, nb, runw, runp, 0) + rng_range(&b->r, 1 * US, 20 * US);
		k -= 1 + nb;
		if (sec && k > 0) {
			ev_add(b, th, WIRE_WAIT, tt, secdur, pick(b, secp), 0, 0);
			tt += secdur + rng_range(&b->r, 1 * US, 20 * US);
			k--;
		}
	}
}

enum step_kind { S_DB, S_HANDOFF, S_RUNBUG, S_DISKBUG, S_CONVOY };

struct step {
	int kind, hit;
	int64_t n, dur;             /* samples; wait length */
	int64_t eps, latw, lat2;    /* handoff: post-to-block, worker wake-up, requester wake-up */
	int64_t off, lat;           /* convoy: holder ran this long before, wake-up latency */
	int nco;                    /* convoy: other requests queued behind */
};

static int64_t step_len(const struct sbuild *b, const struct step *s)
{
	switch (s->kind) {
	case S_HANDOFF:
		return s->latw + s->n * b->p + s->lat2 + GAP;
	case S_RUNBUG:
		return s->n * b->p + GAP;
	case S_CONVOY:
		return s->n * b->p - s->off + s->lat + GAP;
	default:
		return s->dur + GAP;
	}
}

/* A worker (or the timer thread) idle since before `when`. */
static int free_thread(struct sbuild *b, int role, int64_t when)
{
	int cand[16], n = 0;

	if (role == R_TIMER && b->th[b->timer].busy + 30 * US < when)
		return b->timer;
	for (int i = 0; i < b->nworkers; i++)
		if (b->th[b->workers[i]].busy + 30 * US < when)
			cand[n++] = b->workers[i];
	return n ? cand[rng_below(&b->r, (uint64_t)n)] : -1;
}

static const struct pool *hit_pool(struct sbuild *b, const struct shit *h, int route)
{
	const struct bug *bug = &b->g->bugs[h->bug];
	int caller = bug->type == B_ARCH32 ? 0 : h->variant;

	return &bug->pools[caller][route];
}

static int64_t step_emit(struct sbuild *b, struct step *s, int64_t t)
{
	struct app *a = b->a;
	struct route *rt = &a->routes[b->route];
	struct shit *h = s->kind >= S_RUNBUG ? &b->hits[s->hit] : NULL;
	int st = b->st, tag = h ? h->bug + 1 : 0;

	switch (s->kind) {
	case S_HANDOFF: {
		int w = free_thread(b, R_WORKER, t + s->latw - 20 * US);
		int64_t wake = t + s->latw, end = wake + s->n * b->p + s->lat2, from;

		if (w < 0) {    /* every worker busy: the request waits on the database instead */
			ev_add(b, st, WIRE_WAIT, t, end - t, pick(b, &rt->wait), 0, 0);
			return end + GAP;
		}
		from = b->th[w].busy + rng_range(&b->r, 1 * US, 10 * US);
		ev_add(b, w, WIRE_WAIT, from, wake - from, pick(b, &a->worker_idle), b->th[st].tid, 0);
		runs_add(b, w, wake, s->n, &b->wsw, NULL, 0);
		ev_add(b, st, WIRE_WAIT, t + s->eps, end - (t + s->eps), pick(b, &rt->handoff), b->th[w].tid, 0);
		b->th[w].busy = end + GAP;
		return end + GAP;
	}
	case S_RUNBUG:
		runs_add(b, st, t, s->n, NULL, hit_pool(b, h, b->route), tag);
		h->cost += s->n * b->p;
		return t + s->n * b->p + GAP;
	case S_DISKBUG:
		ev_add(b, st, WIRE_WAIT, t, s->dur, pick(b, hit_pool(b, h, b->route)), 0, tag);
		h->cost += s->dur;
		return t + s->dur + GAP;
	case S_CONVOY: {
		const struct bug *bug = &b->g->bugs[h->bug];
		int64_t h0 = t - s->off, unlock, end;
		int ho = free_thread(b, bug->fl->holder_role, h0);

		if (ho < 0) {   /* nobody free to hold the lock yet: run a little first */
			t = runs_add(b, st, t, 1, &b->wsr[b->route], NULL, 0) + GAP;
			h0 = t - s->off;
			ho = free_thread(b, bug->fl->holder_role, h0);
			if (ho < 0)
				die("internal: no thread free to hold a lock");
		}
		unlock = h0 + s->n * b->p;
		end = unlock + s->lat;
		if (ho == b->timer)
			ev_add(b, ho, WIRE_WAIT, b->th[ho].busy + 2 * US, h0 - 5 * US - b->th[ho].busy - 2 * US,
			       pick(b, &a->timer_wait), 0, 0);
		else
			ev_add(b, ho, WIRE_WAIT, b->th[ho].busy + 2 * US, h0 - 5 * US - b->th[ho].busy - 2 * US,
			       pick(b, &a->worker_idle), b->th[b->timer].tid, 0);
		runs_add(b, ho, h0, s->n, NULL, &bug->holder, tag);
		h->cost += s->n * b->p;
		ev_add(b, st, WIRE_WAIT, t, end - t, pick(b, hit_pool(b, h, b->route)), b->th[ho].tid, tag);
		h->wait_cost += end - t;
		b->th[ho].busy = end + GAP;
		/* other requests queue on the same lock; they are not part of this symptom */
		for (int c = 0; c < s->nco; c++) {
			int64_t tc = t + rng_range(&b->r, 0, (end - t) / 2), nb = rng_range(&b->r, 1, 2);
			int64_t rs = tc - nb * b->p - 10 * US;
			int cand[8], n = 0, f;
			for (int i = 0; i < b->nloops; i++)
				if (b->th[b->loops[i]].busy + 300 * US < rs)
					cand[n++] = b->loops[i];
			if (!n)
				break;
			f = cand[rng_below(&b->r, (uint64_t)n)];
			ev_add(b, f, WIRE_WAIT, b->th[f].busy + 2 * US, rs - 5 * US - b->th[f].busy - 2 * US,
			       pick(b, &a->loop_idle), 0, 0);
			runs_add(b, f, rs, nb, &b->wsr[rng_below(&b->r, (uint64_t)a->nroutes)], NULL, 0);
			ev_add(b, f, WIRE_WAIT, tc, end + rng_range(&b->r, 200 * US, 1500 * US) - tc,
			       pick(b, hit_pool(b, h, (int)rng_below(&b->r, (uint64_t)a->nroutes))),
			       b->th[st].tid, 0);
			b->th[f].busy += GAP;
		}
		return end + GAP;
	}
	default:
		ev_add(b, st, WIRE_WAIT, t, s->dur, pick(b, &rt->wait), 0, 0);
		return t + s->dur + GAP;
	}
}

static void steps_shuffle(struct rng *r, struct step *s, int n)
{
	for (int i = n - 1; i > 0; i--) {
		int j = (int)rng_below(r, (uint64_t)i + 1);
		struct step t = s[i];
		s[i] = s[j];
		s[j] = t;
	}
}

/* Fills a thread up to just before the symptom window, if there is room. */
static void prefill(struct sbuild *b, int th, int64_t to, int64_t k)
{
	int64_t room = (to - b->th[th].busy) / (2 * MINEV);

	if (k > room)
		k = room;
	if (k > 0)
		fill(b, th, to, k, true);
}

/* Builds the whole stream at b->scale. Returns 0, or -1 when it needs more than b->events events. */
static int stream_try(struct sbuild *b)
{
	struct gen *g = b->g;
	struct host *h = b->h;
	struct app *a = b->a;
	struct rng *r = &b->r;
	const struct route_spec *rs = a->routes[b->route].spec;
	int64_t M = b->events, p = b->p, t, total, nnorm, chunk[40], kw, kb, kf, pre_kw, pre_kb, rest;
	struct step steps[39];
	double wts[40], wsum = 0, pre;
	int ns = 0, nw, stpos, nd, nh;

	b->nev = 0;
	b->seq = 0;
	b->nth = 0;
	b->nloops = 0;
	b->nworkers = 0;
	for (int i = 0; i < b->nhits; i++)
		b->hits[i].cost = b->hits[i].wait_cost = 0;
	b->T0 = h->clock + rng_range(r, 60LL * 1000 * MS, 1800LL * 1000 * MS);

	/* threads: their ids follow the process id in creation order */
	b->mainthr = thr_add(b, h->pid, R_MAIN);
	stpos = (int)rng_below(r, (uint64_t)h->loops);
	for (int i = 0; i < h->loops; i++) {
		if (i == stpos)
			b->st = thr_add(b, h->pid + 1 + i, R_ST);
		else
			b->loops[b->nloops++] = thr_add(b, h->pid + 1 + i, R_LOOP);
	}
	nw = (int)min64(h->workers, max64(2, M / 250));
	for (int i = 0; i < nw; i++)
		b->workers[b->nworkers++] = thr_add(b, h->pid + 1 + h->loops + i, R_WORKER);
	b->gc = thr_add(b, h->pid + 1 + h->loops + h->workers, R_GC);
	b->timer = thr_add(b, h->pid + 2 + h->loops + h->workers, R_TIMER);
	b->io = thr_add(b, h->pid + 3 + h->loops + h->workers, R_IO);

	/* working sets: the part of the code base this episode exercised */
	for (int ri = 0; ri < a->nroutes; ri++)
		ws_build(b, &b->wsr[ri], &a->routes[ri].run,
			 (size_t)(ri == b->route ? rng_range(r, 90, 200) : rng_range(r, 20, 50)), ++g->mark,
			 g->ws_cdf);
	ws_build(b, &b->wsw, &a->worker_run, (size_t)rng_range(r, 15, 40), ++g->mark, g->ws_cdf);

	/* the symptom thread before the window: idle in epoll, a few quick requests */
	t = b->th[b->st].busy;
	for (int k = 0, npre = (int)rng_range(r, 2, 5); k < npre; k++) {
		int64_t idle = rng_range(r, 30 * MS, 400 * MS);
		ev_add(b, b->st, WIRE_WAIT, t, idle, pick(b, &a->loop_idle), 0, 0);
		t += idle + GAP;
		if (k < npre - 1) {
			int rr = (int)rng_below(r, (uint64_t)a->nroutes);
			t = runs_add(b, b->st, t, samples(b, ms_scaled(b, 2, 15), 1), &b->wsr[rr], NULL, 0) + GAP;
			if (rng_chance(r, 0.5)) {
				int64_t d = max64(20 * US, ms_scaled(b, 0.2, 2.5));
				ev_add(b, b->st, WIRE_WAIT, t, d, pick(b, &a->routes[rr].wait), 0, 0);
				t += d + GAP;
			}
		}
	}
	b->s0 = t + rng_range(r, 2 * US, 20 * US);

	/* the window's plan: normal work interleaved with waits, hand-offs and the bugs */
	b->threshold = max64(5, (int64_t)((double)rs->threshold_ms * b->scale + 0.5)) * MS;
	nnorm = samples(b, ms_scaled(b, 100, 300), 1);
	nd = (int)min64(rng_range(r, 2, 8), max64(1, M / 60));
	for (int i = 0; i < nd; i++)
		steps[ns++] = (struct step){ .kind = S_DB, .dur = max64(20 * US, ms_scaled(b, 0.2, 2.5)) };
	nh = b->nworkers ? (int)rng_range(r, 0, 2) : 0;
	for (int i = 0; i < nh; i++)
		steps[ns++] = (struct step){ .kind = S_HANDOFF, .eps = rng_range(r, 60 * US, 150 * US),
					     .latw = rng_range(r, 5 * US, 40 * US),
					     .lat2 = rng_range(r, 10 * US, 60 * US),
					     .n = samples(b, ms_scaled(b, 2, 10), 1) };
	for (int i = 0; i < b->nhits; i++) {
		const struct bug *bug = &g->bugs[b->hits[i].bug];
		int64_t cost = ms_scaled(b, type_params[bug->type].cost_lo_ms, type_params[bug->type].cost_hi_ms);

		if (bug->type == B_ARCH32 && b->arch)
			cost = cost * 13 / 10;  /* the compat path costs more */
		if (bug->type == B_DISKIO) {
			int n = (int)rng_range(r, 1, 3);
			for (int k = 0; k < n; k++)
				steps[ns++] = (struct step){ .kind = S_DISKBUG, .hit = i,
							     .dur = max64(100 * US, cost / n) };
		} else if (bug->type == B_CONVOY) {
			steps[ns++] = (struct step){ .kind = S_CONVOY, .hit = i, .n = samples(b, cost, 1),
						     .off = (int64_t)((double)p * rng_uniform(r, 0.1, 0.9)),
						     .lat = rng_range(r, 10 * US, 60 * US),
						     .nco = rng_chance(r, 0.7) ? (int)rng_range(r, 1, 2) : 0 };
		} else {
			int64_t n = samples(b, cost, 1), nc = min64(n, rng_range(r, 1, 3));
			for (int64_t k = 0; k < nc; k++)
				steps[ns++] = (struct step){ .kind = S_RUNBUG, .hit = i,
							     .n = n / nc + (k < n % nc) };
		}
	}
	total = (ns + 1) * GAP + nnorm * p;
	for (int i = 0; i < ns; i++)
		total += step_len(b, &steps[i]);
	if (!b->base && total <= b->threshold + 2 * GAP) {
		/* a unit only violates once it is longer than its threshold: a slow downstream call */
		steps[ns] = (struct step){ .kind = S_DB,
					   .dur = b->threshold - total + 3 * GAP + max64(1 * MS, ms_scaled(b, 2, 20)) };
		total += step_len(b, &steps[ns]) + GAP;
		ns++;
	}
	steps_shuffle(r, steps, ns);
	for (int i = 0; i <= ns; i++) {
		wts[i] = rng_uniform(r, 0.2, 1.0);
		wsum += wts[i];
	}
	rest = nnorm;
	for (int i = 0; i <= ns; i++) {
		chunk[i] = (int64_t)((double)nnorm * wts[i] / wsum);
		rest -= chunk[i];
	}
	while (rest-- > 0)
		chunk[rng_below(r, (uint64_t)ns + 1)]++;
	if (!chunk[0]) {    /* the unit starts running, not waiting */
		int big = 0;
		for (int i = 1; i <= ns; i++)
			if (chunk[i] > chunk[big])
				big = i;
		chunk[big]--;
		chunk[0]++;
	}

	/* other threads up to the window, with a share of their events */
	pre = (double)(b->s0 - b->T0) / (double)(b->s0 + total + 50 * MS - b->T0);
	kw = max64(2, M * 5 / 100 / max64(1, b->nworkers));
	kb = max64(2, M * 35 / 1000);
	kf = max64(1, (int64_t)((double)M * 0.2 * pre / (double)max64(1, b->nloops)));
	pre_kw = max64(1, (int64_t)((double)kw * pre + 0.5));
	pre_kb = max64(1, (int64_t)((double)kb * pre + 0.5));
	for (int i = 0; i < b->nworkers; i++)
		prefill(b, b->workers[i], b->s0 - 100 * US, pre_kw);
	prefill(b, b->gc, b->s0 - 100 * US, pre_kb);
	prefill(b, b->timer, b->s0 - 100 * US, pre_kb);
	prefill(b, b->io, b->s0 - 100 * US, pre_kb);
	for (int i = 0; i < b->nloops; i++)
		prefill(b, b->loops[i], b->s0 - 100 * US, kf);

	/* the window */
	t = b->s0;
	for (int i = 0; i <= ns; i++) {
		t = runs_add(b, b->st, t, chunk[i], &b->wsr[b->route], NULL, 0) + GAP;
		if (i < ns)
			t = step_emit(b, &steps[i], t);
	}
	b->s1 = b->th[b->st].busy;
	{
		int64_t d = rng_range(r, 5 * MS, 80 * MS);
		ev_add(b, b->st, WIRE_WAIT, b->s1 + GAP, d, pick(b, &a->loop_idle), 0, 0);
		b->T1 = b->s1 + GAP + d;
	}

	/* the rest of everybody's time; the other event loops take what is left */
	for (int i = 0; i < b->nworkers; i++)
		fill(b, b->workers[i], b->T1, max64(1, kw - pre_kw), false);
	fill(b, b->gc, b->T1, max64(1, kb - pre_kb), false);
	fill(b, b->timer, b->T1, max64(1, kb - pre_kb), false);
	fill(b, b->io, b->T1, max64(1, kb - pre_kb), false);
	{
		struct thr *m = &b->th[b->mainthr];
		ev_add(b, b->mainthr, WIRE_WAIT, m->busy, b->T1 + rng_range(r, 1 * MS, 50 * MS) - m->busy,
		       pick(b, &a->main_wait), 0, 0);
	}
	rest = M - (int64_t)b->nev;
	if (rest < 0)
		return -1;
	for (int i = 0; i < b->nloops; i++) {
		int64_t k = rest / b->nloops + (i < rest % b->nloops);
		if (k)
			fill(b, b->loops[i], b->T1, k, false);
	}
	if ((int64_t)b->nev != M)
		die("internal: stream %u has %zu events, not %lld", b->index, b->nev, (long long)M);
	return 0;
}

/* Host, app, unit and the bugs this stream carries. */
static void stream_choose(struct gen *g, struct sbuild *b, uint32_t index)
{
	struct rng r;
	unsigned char raw[16];
	char hex[33];

	rng_init(&r, g->o.seed, RNG_PICK, index);
	b->index = index;
	b->a = &g->apps[rng_below(&r, (uint64_t)g->napps)];
	b->h = &g->hosts[b->a->hosts[rng_below(&r, (uint64_t)b->a->nhosts)]];
	b->route = (int)cdf_pick(b->a->route_cdf, (size_t)b->a->nroutes, &r);
	b->arch = b->h->arch;
	b->p = b->h->period;
	for (int k = 0; k < 16; k++)
		raw[k] = (unsigned char)rng_next(&r);
	raw[6] = (unsigned char)((raw[6] & 0x0f) | 0x40);
	raw[8] = (unsigned char)((raw[8] & 0x3f) | 0x80);
	util_hex(raw, sizeof(raw), hex);
	snprintf(b->id, sizeof(b->id), "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16, hex + 20);

	b->nhits = 0;
	for (int i = 0; i < g->nbugs && !b->base; i++) {
		struct bug *bug = &g->bugs[i];
		size_t sofar = bug->var_hits[0] + bug->var_hits[1];
		bool lucky;
		int v;

		if (bug->app != b->a->idx)
			continue;
		/* --regression-conf halves the regression's hosts: it hits twice as often on them */
		lucky = rng_chance(&r, bug->type == B_REGRESSION && g->o.regression_conf ? 2 * bug->fraction : bug->fraction);
		if (bug->type == B_ARCH32)
			v = b->arch;
		else if (sofar < (size_t)bug->ncallers)
			v = (int)sofar;
		else
			v = (int)rng_below(&r, (uint64_t)bug->ncallers);
		if (bug->version >= 0 && b->h->version != bug->version)
			continue;
		if (bug->type == B_REGRESSION && g->o.regression_conf && b->h->db_pool != REGRESSION_DB_POOL)
			continue;
		/* the first stream that can show a variant always does */
		if ((!lucky && bug->var_hits[v]) || b->nhits == MAX_HITS)
			continue;
		b->hits[b->nhits++] = (struct shit){ i, v, 0, 0 };
		bug->var_hits[v]++;
	}
}

static bool ev_before(const struct ev *a, const struct ev *b)
{
	if (a->ts != b->ts)
		return a->ts < b->ts;
	if (a->tid != b->tid)
		return a->tid < b->tid;
	return a->seq < b->seq;
}

/*
 * Orders the events by (time, thread, creation). Each thread's events were
 * added in time order, so this merges those runs pairwise instead of sorting.
 */
static void events_sort(struct gen *g, struct sbuild *b)
{
	size_t n = b->nev, bound[MAX_THREADS + 1] = { 0 }, pos[MAX_THREADS], nb = 0;
	struct ev *src = arena_alloc(g->arena, n * sizeof(*src)), *dst = b->ev, *t;

	if (!src)
		die("out of memory");
	for (size_t i = 0; i < n; i++)
		bound[b->ev[i].th + 1]++;
	for (int k = 0; k < MAX_THREADS; k++) {
		bound[k + 1] += bound[k];
		pos[k] = bound[k];
	}
	for (size_t i = 0; i < n; i++)
		src[pos[b->ev[i].th]++] = b->ev[i];
	/* run boundaries of the non-empty threads */
	for (int k = 0; k <= MAX_THREADS; k++)
		if (k == 0 || bound[k] != bound[nb - 1])
			bound[nb++] = bound[k];
	while (nb > 2) {
		size_t out = 0, m = 0;
		for (size_t r = 0; r + 1 < nb; r += 2) {
			size_t i = bound[r], mid = bound[r + 1], end = r + 2 < nb ? bound[r + 2] : mid, j = mid;
			bound[m++] = out;
			while (i < mid && j < end)
				dst[out++] = ev_before(&src[j], &src[i]) ? src[j++] : src[i++];
			while (i < mid)
				dst[out++] = src[i++];
			while (j < end)
				dst[out++] = src[j++];
		}
		bound[m++] = out;
		nb = m;
		t = src;
		src = dst;
		dst = t;
	}
	if (src != b->ev)
		memcpy(b->ev, src, n * sizeof(*src));
}

/*
 * The stream's wait-graph AOI (docs: mining.md section 3), computed here from
 * what was generated, so that the truth can state it and --validate can check
 * that every injected event is inside it. Events are sorted by time.
 */
static void stream_aoi(struct gen *g, struct sbuild *b, struct srec *rec)
{
	size_t n = b->nev, qh = 0, qt = 0, start[MAX_THREADS + 1] = { 0 }, pos[MAX_THREADS];
	uint32_t *order = arena_alloc(g->arena, n * sizeof(*order));
	uint32_t *queue = arena_alloc(g->arena, n * sizeof(*queue));
	uint8_t *in = arena_calloc(g->arena, n, 1);
	int64_t tagged[MAX_HITS] = { 0 };

	if (!order || !queue || !in)
		die("out of memory");
	for (size_t i = 0; i < n; i++)
		start[b->ev[i].th + 1]++;
	for (int t = 0; t < MAX_THREADS; t++) {
		start[t + 1] += start[t];
		pos[t] = start[t];
	}
	for (size_t i = 0; i < n; i++)
		order[pos[b->ev[i].th]++] = (uint32_t)i;
	for (size_t k = start[b->st]; k < start[b->st + 1]; k++) {
		const struct ev *e = &b->ev[order[k]];
		if (e->ts <= b->s1 && e->ts + e->dur >= b->s0) {
			in[order[k]] = 1;
			queue[qt++] = order[k];
		}
	}
	while (qh < qt) {
		const struct ev *e = &b->ev[queue[qh++]];
		int th = -1;
		size_t lo, hi;

		if (e->kind != WIRE_WAIT || !e->readier)
			continue;
		for (int t = 0; t < b->nth; t++)
			if (b->th[t].tid == e->readier)
				th = t;
		if (th < 0)
			continue;
		/* a thread's events do not overlap, so their ends grow with their starts */
		lo = start[th];
		hi = start[th + 1];
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			const struct ev *m = &b->ev[order[mid]];
			if (m->ts + m->dur < e->ts)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (size_t k = lo; k < start[th + 1] && b->ev[order[k]].ts <= e->ts + e->dur; k++)
			if (!in[order[k]]) {
				in[order[k]] = 1;
				queue[qt++] = order[k];
			}
	}
	rec->aoi_run = rec->aoi_wait = rec->total_run = rec->total_wait = 0;
	for (size_t i = 0; i < n; i++) {
		const struct ev *e = &b->ev[i];
		int64_t *tot = e->kind == WIRE_RUN ? &rec->total_run : &rec->total_wait;
		*tot += e->dur;
		if (in[i])
			*(e->kind == WIRE_RUN ? &rec->aoi_run : &rec->aoi_wait) += e->dur;
		if (e->tag) {
			if (!in[i])
				die("internal: stream %u: an injected event is outside the wait graph", b->index);
			for (int k = 0; k < b->nhits; k++)
				if (b->hits[k].bug == e->tag - 1)
					tagged[k] += e->dur;
		}
	}
	for (int k = 0; k < b->nhits; k++)
		if (tagged[k] != b->hits[k].cost + b->hits[k].wait_cost)
			die("internal: stream %u: bug %d cost %lld, events say %lld", b->index, b->hits[k].bug,
			    (long long)(b->hits[k].cost + b->hits[k].wait_cost), (long long)tagged[k]);
}

/* Sorts, checks and writes the stream, then records it for the truth and the statistics. */
static void stream_finish(struct gen *g, struct sbuild *b, FILE *out)
{
	struct app *a = b->a;
	struct host *h = b->h;
	size_t n = b->nev, nls = 0, nlf = 0;
	const char **frames;
	struct wire_stack *stacks;
	struct wire_event *wev;
	struct wire_stream ws;
	struct srec *rec;
	int64_t maxend = 0;

	arena_reset(g->arena);
	events_sort(g, b);
	GROW(g->recs, g->nrecs, g->caprecs);
	rec = &g->recs[g->nrecs++];
	memset(rec, 0, sizeof(*rec));
	memcpy(rec->id, b->id, sizeof(rec->id));
	rec->index = b->index;
	rec->host = (int)(h - g->hosts);
	rec->route = b->route;
	rec->s0 = b->s0;
	rec->s1 = b->s1;
	rec->threshold = b->threshold;
	rec->base = b->base;
	stream_aoi(g, b, rec);

	/* the stream's own tables, in order of first use */
	for (size_t i = 0; i < n; i++) {
		uint32_t s = b->ev[i].stack;
		if (g->smap[s] < 0) {
			g->smap[s] = (int32_t)nls;
			g->touched_s[nls++] = s;
		}
		g->st_depth_sum += g->st.slen[s];
		if (b->ev[i].th == b->st && b->ev[i].ts <= b->s1 && b->ev[i].ts + b->ev[i].dur >= b->s0) {
			g->st_win_events++;
			g->st_win_depth += g->st.slen[s];
		}
		maxend = max64(maxend, b->ev[i].ts + b->ev[i].dur);
		if (b->ev[i].kind == WIRE_RUN)
			g->st_run++;
		else
			g->st_wait++;
	}
	for (size_t k = 0; k < nls; k++) {
		uint32_t s = g->touched_s[k];
		for (uint32_t j = 0; j < g->st.slen[s]; j++) {
			uint32_t f = g->st.fr[g->st.soff[s] + j];
			if (g->fmap[f] < 0) {
				g->fmap[f] = (int32_t)nlf;
				g->touched_f[nlf++] = f;
			}
		}
	}
	frames = arena_alloc(g->arena, nlf * sizeof(*frames));
	stacks = arena_alloc(g->arena, nls * sizeof(*stacks));
	wev = arena_alloc(g->arena, n * sizeof(*wev));
	if (!frames || !stacks || !wev)
		die("out of memory");
	for (size_t j = 0; j < nlf; j++)
		frames[j] = frame_str(&g->st, g->touched_f[j]);
	for (size_t k = 0; k < nls; k++) {
		uint32_t s = g->touched_s[k], len = g->st.slen[s];
		uint32_t *ix = arena_alloc(g->arena, len * sizeof(*ix));
		if (!ix)
			die("out of memory");
		for (uint32_t j = 0; j < len; j++)
			ix[j] = (uint32_t)g->fmap[g->st.fr[g->st.soff[s] + j]];
		stacks[k].frames = ix;
		stacks[k].len = len;
	}
	for (size_t i = 0; i < n; i++) {
		const struct ev *e = &b->ev[i];
		wev[i] = (struct wire_event){ .tid = e->tid, .ts_ns = e->ts, .dur_ns = e->dur,
					      .readier_tid = e->readier, .stack = (uint32_t)g->smap[e->stack],
					      .kind = e->kind };
	}
	memset(&ws, 0, sizeof(ws));
	memcpy(ws.stream_id, b->id, sizeof(ws.stream_id));
	ws.host = h->name;
	ws.app = a->name;
	ws.version = a->spec->versions[h->version];
	ws.build_id = a->build_ids[h->version][h->arch];
	ws.labels = h->labels;
	ws.nlabels = h->nlabels;
	ws.role = b->base ? WIRE_ROLE_BASELINE : WIRE_ROLE_VIOLATION;
	ws.symptom = (struct wire_symptom){ b->base ? "unit_sample" : "unit_violation", b->th[b->st].tid, b->s0, b->s1,
					    a->routes[b->route].spec->path, b->threshold };
	ws.frames = frames;
	ws.nframes = nlf;
	ws.stacks = stacks;
	ws.nstacks = nls;
	ws.events = wev;
	ws.nevents = n;
	{
		/* thread names as an agent reads them (comm), for the dashboard's timeline: the role and
		 * the thread's number in the process */
		static const char *const role_name[] = { "loop", "loop", "worker", "gc", "timer", "io", "main" };
		struct wire_thread *th = arena_alloc(g->arena, (size_t)b->nth * sizeof(*th));

		if (!th)
			die("out of memory");
		for (int t = 0; t < b->nth; t++) {
			char name[WIRE_MAX_THREAD_NAME + 1];

			if (b->th[t].role == R_MAIN)
				snprintf(name, sizeof(name), "%s", a->name);
			else
				snprintf(name, sizeof(name), "%s/%lld", role_name[b->th[t].role],
					 (long long)(b->th[t].tid - h->pid));
			th[t].tid = b->th[t].tid;
			if (!(th[t].name = arena_strndup(g->arena, name, strlen(name))))
				die("out of memory");
		}
		ws.threads = th;
		ws.nthreads = (size_t)b->nth;
	}

	buf_reset(&g->out);
	if (wire_write_json(&ws, &g->out) < 0 || buf_putc(&g->out, '\n') < 0)
		die("out of memory");
	if (fwrite(g->out.data, 1, g->out.len, out) != g->out.len)
		die("write failed");
	if (g->o.validate) {
		struct wire_stream chk;
		arena_reset(g->varena);
		if (wire_parse(g->parser, g->out.data, g->out.len - 1, g->varena, &chk) != WIRE_OK)
			die("stream %u does not validate: %s", b->index, wire_parser_error(g->parser));
		if (chk.nevents != n || chk.nstacks != nls || chk.nframes != nlf)
			die("stream %u: parsed back with other counts", b->index);
	}

	for (int k = 0; k < b->nhits; k++) {
		struct bug *bug = &g->bugs[b->hits[k].bug];
		GROW(bug->hits, bug->nhits, bug->caphits);
		bug->hits[bug->nhits++] = (struct bhit){ b->index, (uint32_t)(rec - g->recs),
							 (uint8_t)b->hits[k].variant, b->hits[k].cost,
							 b->hits[k].wait_cost };
		bug->cost += b->hits[k].cost;
		rec->bugs[rec->nbugs++] = (int8_t)b->hits[k].bug;
		bug->wait_cost += b->hits[k].wait_cost;
	}
	g->st_events += n;
	g->st_stacks_sum += nls;
	g->st_frames_sum += nlf;
	if (nls < g->st_min_stacks)
		g->st_min_stacks = nls;
	if (nls > g->st_max_stacks)
		g->st_max_stacks = nls;
	for (size_t k = 0; k < nls; k++) {
		g->st_distinct_stacks += !g->stack_seen[g->touched_s[k]];
		g->stack_seen[g->touched_s[k]] = 1;
		g->smap[g->touched_s[k]] = -1;
	}
	for (size_t j = 0; j < nlf; j++) {
		g->st_distinct_frames += !g->frame_seen[g->touched_f[j]];
		g->frame_seen[g->touched_f[j]] = 1;
		g->fmap[g->touched_f[j]] = -1;
	}
	/* the host's next episode comes later on its clock */
	h->clock = maxend;
}

static void stream_run(struct gen *g, struct sbuild *b, uint32_t index, FILE *out)
{
	stream_choose(g, b, index);
	b->scale = b->events >= 2000 ? 1.0 : (double)b->events / 2000.0;
	for (int attempt = 0;; attempt++) {
		rng_init(&b->r, g->o.seed, RNG_BUILD, (uint64_t)index * 16 + (uint64_t)attempt);
		if (stream_try(b) == 0)
			break;
		if (attempt == 11)
			die("--events %lld is too few for stream %u", (long long)b->events, index);
		b->scale *= 0.6;
	}
	stream_finish(g, b, out);
}

/* ---------------------------------------------------------------------------
 * The truth: what was injected where, for the end-to-end tests.
 */

static void json_str(struct buf *o, const char *s)
{
	buf_put_json_str(o, s, strlen(s));
}

static void json_frames(struct gen *g, struct buf *o, const uint32_t *f, size_t n)
{
	buf_putc(o, '[');
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_puts(o, ", ");
		json_str(o, frame_str(&g->st, f[i]));
	}
	buf_putc(o, ']');
}

/* A list of frames given as chain text for an app (no groups, no marks). */
static void json_chain(struct gen *g, struct buf *o, const char *chain, const char *mod)
{
	struct seq q;

	q.n = 0;
	chain_expand(g, chain, mod, 0, NULL, &q);
	json_frames(g, o, q.f, q.n);
}

static void truth_noise(struct gen *g, struct buf *o, const struct app *a, bool *first)
{
	static const struct {
		const char *cls, *kind, *where, *chain;
		bool aoi;
	} noise[] = {
		{ "symptom_idle", "wait", "the symptom thread, idle in epoll_wait before the symptom window",
		  "%A!ev::EpollPoller::wait(int);libc.so.6!epoll_wait", false },
		{ "loop_idle", "wait", "the other event-loop threads, idle in epoll_wait",
		  "%A!ev::EpollPoller::wait(int);libc.so.6!epoll_wait", false },
		{ "worker_idle", "wait", "worker-pool threads waiting for tasks",
		  "%A!pool::ThreadPool::worker_loop();libpthread.so.0!pthread_cond_wait@@GLIBC_2.3.2", false },
		{ "main_idle", "wait", "the main thread, waiting for a signal for the whole trace",
		  "%A!app::Server::wait_for_signal();libc.so.6!sigwait", false },
		{ "gc", "run", "the epoch garbage collector thread", "%A!mem::EpochGC::run()", false },
		{ "timer", "run", "the timer-wheel thread (ticks, metrics, idle connections)",
		  "%A!timer::Wheel::run();%A!timer::Wheel::tick()", false },
		{ "log_writer", "wait", "the log writer's own fdatasync, outside the request path",
		  "%A!logging::AsyncFileSink::flush();libc.so.6!fdatasync", false },
		{ "normal_work", "run", "request handling: many cheap, varied stacks under every handler",
		  "%A!http::Router::dispatch(http::Request&, http::Response&)", true },
		{ "worker_tasks", "run", "worker-pool tasks; those a request waits for are in the AOI",
		  "%A!pool::ThreadPool::worker_loop();%A!std::function<void ()>::operator()() const", true },
		{ "request_waits", "wait", "short database, cache and downstream waits of requests",
		  "%A!http::Router::dispatch(http::Request&, http::Response&);libc.so.6!__poll", true },
		{ "handoff_waits", "wait", "requests waiting for a task they gave the worker pool",
		  "%A!std::__future_base::_State_baseV2::wait();libc.so.6!syscall", true },
	};

	for (size_t i = 0; i < NWORDS(noise); i++) {
		buf_puts(o, *first ? "\n    " : ",\n    ");
		*first = false;
		buf_puts(o, "{\"app\": ");
		json_str(o, a->name);
		buf_puts(o, ", \"class\": ");
		json_str(o, noise[i].cls);
		buf_puts(o, ", \"kind\": ");
		json_str(o, noise[i].kind);
		buf_puts(o, ", \"where\": ");
		json_str(o, noise[i].where);
		buf_printf(o, ", \"in_waitgraph_aoi\": %s, \"frames\": ", noise[i].aoi ? "true" : "false");
		json_chain(g, o, noise[i].chain, a->mod);
		buf_putc(o, '}');
	}
}

static void truth_bug(struct gen *g, struct buf *o, const struct bug *b)
{
	const struct app *a = &g->apps[b->app];
	const char *kind = b->type == B_DISKIO ? "wait" : "run";

	buf_printf(o, "{\"id\": %d, \"name\": ", b->id);
	json_str(o, b->name);
	buf_puts(o, ", \"type\": ");
	json_str(o, type_names[b->type]);
	buf_puts(o, ", \"app\": ");
	json_str(o, a->name);
	buf_puts(o, ", \"description\": ");
	json_str(o, b->fl->desc);
	buf_puts(o, ",\n      \"kind\": ");
	json_str(o, kind);
	buf_puts(o, ", \"frames\": ");
	json_frames(g, o, b->frames, b->nframes);
	if (b->type == B_CONVOY) {
		buf_puts(o, ",\n      \"wait_kind\": \"wait\", \"wait_frames\": ");
		json_frames(g, o, b->wframes, b->nwframes);
	}
	buf_puts(o, ",\n      \"version\": ");
	if (b->version >= 0)
		json_str(o, a->spec->versions[b->version]);
	else
		buf_puts(o, "null");
	if (b->type == B_REGRESSION && g->o.regression_conf)
		buf_printf(o, ", \"conf\": {\"conf.db_pool\": \"%d\"}", REGRESSION_DB_POOL);
	else
		buf_puts(o, ", \"conf\": null");
	buf_printf(o, ", \"fraction\": %.3f, \"injected_streams\": %zu, \"cost_ns\": %lld", b->fraction,
		   b->nhits, (long long)b->cost);
	if (b->type == B_CONVOY)
		buf_printf(o, ", \"wait_cost_ns\": %lld", (long long)b->wait_cost);
	buf_puts(o, ",\n      \"variants\": [");
	for (int v = 0; v < b->nvariants; v++) {
		const struct variant *var = &b->var[v];
		buf_puts(o, v ? ",\n        " : "\n        ");
		buf_printf(o, "{\"variant\": %d, \"name\": ", v);
		json_str(o, var->name);
		buf_puts(o, ", \"when\": ");
		json_str(o, var->when);
		buf_puts(o, ", \"kind\": ");
		json_str(o, b->type == B_CONVOY ? "wait" : kind);
		buf_printf(o, ", \"streams\": %zu, \"frames\": ", b->var_hits[v]);
		json_frames(g, o, var->frames, var->nframes);
		buf_putc(o, '}');
	}
	buf_puts(o, "],\n      \"streams\": [");
	for (size_t i = 0; i < b->nhits; i++) {
		const struct bhit *h = &b->hits[i];
		buf_puts(o, i ? ",\n        " : "\n        ");
		buf_printf(o, "{\"index\": %u, \"stream_id\": \"%s\", \"variant\": %d, \"cost_ns\": %lld",
			   h->stream, g->recs[h->rec].id, h->variant, (long long)h->cost);
		if (b->type == B_CONVOY)
			buf_printf(o, ", \"wait_cost_ns\": %lld", (long long)h->wait_cost);
		buf_putc(o, '}');
	}
	buf_puts(o, "]}");
}

static int truth_write(struct gen *g, const char *path)
{
	struct buf o = BUF_INIT(0);
	FILE *f;
	bool first = true;
	int rc = 0;

	buf_printf(&o, "{\"generator\": \"genfleet\", \"options\": {\"seed\": %llu, \"streams\": %lld, "
		   "\"events\": %lld, \"hosts\": %lld, \"apps\": ", (unsigned long long)g->o.seed,
		   (long long)g->o.streams, (long long)g->o.events, (long long)g->o.hosts);
	json_str(&o, g->o.apps);
	buf_printf(&o, ", \"bugs\": %lld, \"distinct_stacks\": %lld, \"depth\": %lld, \"baseline\": %lld, "
		   "\"regression_conf\": %s},\n", (long long)g->o.bugs, (long long)g->o.distinct, (long long)g->o.depth,
		   (long long)g->o.baseline, g->o.regression_conf ? "true" : "false");
	buf_puts(&o, "  \"apps\": [");
	for (int i = 0; i < g->napps; i++) {
		const struct app *a = &g->apps[i];
		buf_puts(&o, i ? ",\n    " : "\n    ");
		buf_puts(&o, "{\"name\": ");
		json_str(&o, a->name);
		buf_puts(&o, ", \"versions\": [");
		for (int v = 0; v < a->nversions; v++) {
			if (v)
				buf_puts(&o, ", ");
			json_str(&o, a->spec->versions[v]);
		}
		buf_printf(&o, "], \"hosts\": %d, \"functions\": %zu, \"units\": [", a->nhosts, a->nfns);
		for (int r = 0; r < a->nroutes; r++) {
			buf_puts(&o, r ? ", " : "");
			buf_puts(&o, "{\"unit_type\": ");
			json_str(&o, a->routes[r].spec->path);
			buf_puts(&o, ", \"handler\": ");
			json_str(&o, frame_str(&g->st, a->routes[r].handler_fid));
			buf_printf(&o, ", \"threshold_ns\": %lld}", (long long)a->routes[r].spec->threshold_ms * MS);
		}
		buf_puts(&o, "]}");
	}
	buf_puts(&o, "],\n  \"hosts\": [");
	for (int i = 0; i < g->nhosts; i++) {
		const struct host *h = &g->hosts[i];
		buf_puts(&o, i ? ",\n    " : "\n    ");
		buf_puts(&o, "{\"name\": ");
		json_str(&o, h->name);
		buf_puts(&o, ", \"app\": ");
		json_str(&o, g->apps[h->app].name);
		buf_puts(&o, ", \"version\": ");
		json_str(&o, g->apps[h->app].spec->versions[h->version]);
		buf_printf(&o, ", \"period_ns\": %lld, \"labels\": {", (long long)h->period);
		for (size_t k = 0; k < h->nlabels; k++) {
			buf_puts(&o, k ? ", " : "");
			json_str(&o, h->labels[k].key);
			buf_puts(&o, ": ");
			json_str(&o, h->labels[k].value);
		}
		buf_puts(&o, "}}");
	}
	buf_puts(&o, "],\n  \"arch_frames\": {");
	for (int arch = 1; arch >= 0; arch--) {
		bool any = false;
		buf_puts(&o, arch ? "\"i686\": [" : ",\n    \"x86_64\": [");
		for (size_t id = 0; id < intern_count(g->st.fmap); id++)
			if (g->st.fuse[id] == (1 << arch)) {
				buf_puts(&o, any ? ", " : "");
				json_str(&o, frame_str(&g->st, (uint32_t)id));
				any = true;
			}
		buf_putc(&o, ']');
	}
	buf_puts(&o, "},\n  \"bugs\": [");
	for (int i = 0; i < g->nbugs; i++) {
		buf_puts(&o, i ? ",\n    " : "\n    ");
		truth_bug(g, &o, &g->bugs[i]);
	}
	buf_puts(&o, "],\n  \"noise\": [");
	for (int i = 0; i < g->napps; i++)
		truth_noise(g, &o, &g->apps[i], &first);
	buf_puts(&o, "],\n  \"stream_list\": [");
	for (size_t i = 0; i < g->nrecs; i++) {
		const struct srec *s = &g->recs[i];
		const struct host *h = &g->hosts[s->host];
		const struct app *a = &g->apps[h->app];
		bool any = false;

		buf_puts(&o, i ? ",\n    " : "\n    ");
		buf_printf(&o, "{\"index\": %u, \"stream_id\": \"%s\", \"role\": \"%s\", \"host\": ", s->index, s->id,
			   s->base ? "baseline" : "violation");
		json_str(&o, h->name);
		buf_puts(&o, ", \"app\": ");
		json_str(&o, a->name);
		buf_puts(&o, ", \"version\": ");
		json_str(&o, a->spec->versions[h->version]);
		buf_printf(&o, ", \"arch\": \"%s\", \"unit_type\": ", h->arch ? "i686" : "x86_64");
		json_str(&o, a->routes[s->route].spec->path);
		buf_printf(&o, ", \"symptom_ns\": [%lld, %lld], \"threshold_ns\": %lld, \"aoi_run_ns\": %lld, "
			   "\"aoi_wait_ns\": %lld, \"total_run_ns\": %lld, \"total_wait_ns\": %lld, \"bugs\": [",
			   (long long)s->s0, (long long)s->s1, (long long)s->threshold, (long long)s->aoi_run,
			   (long long)s->aoi_wait, (long long)s->total_run, (long long)s->total_wait);
		for (int k = 0; k < s->nbugs; k++) {
			buf_printf(&o, "%s%d", any ? ", " : "", s->bugs[k]);
			any = true;
		}
		buf_puts(&o, "]}");
	}
	buf_puts(&o, "]}\n");

	f = fopen(path, "w");
	if (!f || fwrite(o.data, 1, o.len, f) != o.len)
		rc = -1;
	if (f && fclose(f) != 0)
		rc = -1;
	buf_release(&o);
	return rc;
}

/* ---------------------------------------------------------------------------
 * Options, statistics, cleanup.
 */

static const char usage[] =
	"usage: genfleet [OPTIONS]\n"
	"\n"
	"Writes a synthetic fleet of trace streams (wire format v1, one JSON object per line)\n"
	"with injected performance bugs; docs/demo-fleet.md describes it.\n"
	"\n"
	"Options:\n"
	"  --streams N           streams to write (default 100)\n"
	"  --baseline N          then N baseline streams: normal units of the same fleet, no bug\n"
	"  --regression-conf     the version regression also needs the host's conf.db_pool = 16\n"
	"                        (role baseline; default 0)\n"
	"  --events M            events per stream, exactly (default 2000, at least 64)\n"
	"  --hosts H             hosts in the fleet, spread over the apps (default 40)\n"
	"  --apps LIST           comma-separated app names (default checkout,search)\n"
	"  --seed S              seed; the same seed gives the same bytes (default 1)\n"
	"  --bugs K              injected bugs (default 5)\n"
	"  --distinct-stacks D   size of each app's pool of distinct stacks (default 3000)\n"
	"  --depth D             average stack depth (default 36)\n"
	"  --out FILE            write the streams to FILE (default standard output)\n"
	"  --truth FILE          write the ground truth (bugs, where, costs, noise) as JSON\n"
	"  --validate            parse every stream back with the wire-format validator\n"
	"  --stats               print statistics of the generated data on standard error\n"
	"  --first N             number the streams from N: the fleet's later streams, after a run\n"
	"                        that wrote its first N (its code and stacks; new stream ids)\n"
	"  --part I/N            only the streams whose index is I modulo N (N pipes in parallel\n"
	"                        make one fleet; each part forces every bug variant once)\n"
	"  --wait-share F        the event-loop threads' filler is F waits (0.05 to 0.95; default:\n"
	"                        as modelled, about half)\n"
	"  -h, --help            this text\n"
	"\n"
	"Exit status: 0 done, 1 failed, 2 usage error.\n";

static void print_stats(struct gen *g)
{
	double n = g->nrecs ? (double)g->nrecs : 1;

	fprintf(stderr, "genfleet: streams=%zu events=%llu run_share=%.3f distinct_frames=%zu "
		"distinct_stacks=%zu pool_stacks=%zu\n", g->nrecs, (unsigned long long)g->st_events,
		g->st_events ? (double)g->st_run / (double)g->st_events : 0.0, g->st_distinct_frames,
		g->st_distinct_stacks, g->st.nst);
	fprintf(stderr, "genfleet: per_stream stacks_min=%zu stacks_avg=%.1f stacks_max=%zu frames_avg=%.1f "
		"avg_depth=%.2f symptom_window_avg_depth=%.2f\n", g->nrecs ? g->st_min_stacks : 0,
		(double)g->st_stacks_sum / n, g->st_max_stacks, (double)g->st_frames_sum / n,
		g->st_events ? (double)g->st_depth_sum / (double)g->st_events : 0.0,
		g->st_win_events ? (double)g->st_win_depth / (double)g->st_win_events : 0.0);
	for (int i = 0; i < g->nbugs; i++) {
		const struct bug *b = &g->bugs[i];
		fprintf(stderr, "genfleet: bug=%d name=%s type=%s streams=%zu cost_s=%.3f wait_cost_s=%.3f\n", i,
			b->name, type_names[b->type], b->nhits, (double)b->cost / 1e9, (double)b->wait_cost / 1e9);
	}
}

static void gen_free(struct gen *g)
{
	for (int i = 0; i < g->napps; i++) {
		struct app *a = &g->apps[i];
		struct pool *pools[] = { &a->worker_run, &a->worker_idle, &a->loop_idle, &a->main_wait,
					 &a->gc_run, &a->gc_wait, &a->timer_run, &a->timer_wait, &a->io_run,
					 &a->io_sync, &a->io_idle };
		for (size_t k = 0; k < NWORDS(pools); k++)
			pool_release(pools[k]);
		for (int r = 0; r < a->nroutes; r++) {
			pool_release(&a->routes[r].run);
			pool_release(&a->routes[r].wait);
			pool_release(&a->routes[r].handoff);
		}
		free(a->fns);
		free(a->callees);
		free(a->lvl_start);
		free(a->fanin);
		free(a->hosts);
	}
	for (int i = 0; i < g->nbugs; i++) {
		struct bug *b = &g->bugs[i];
		for (int c = 0; c < MAX_CALLERS; c++)
			for (int r = 0; r < MAX_ROUTES; r++)
				pool_release(&b->pools[c][r]);
		pool_release(&b->holder);
		free(b->hits);
	}
	free(g->hosts);
	intern_free(g->st.fmap);
	intern_free(g->st.smap);
	free(g->st.fr);
	free(g->st.soff);
	free(g->st.slen);
	free(g->st.falt);
	free(g->st.fuse);
	free(g->smap);
	free(g->fmap);
	free(g->touched_s);
	free(g->touched_f);
	free(g->pool_mark);
	free(g->stack_seen);
	free(g->frame_seen);
	free(g->recs);
	arena_free(g->arena);
	arena_free(g->varena);
	buf_release(&g->out);
	wire_parser_free(g->parser);
	free(g);
}

static int opt_num(const char *name, const char *arg, int64_t min, int64_t max, int64_t *out)
{
	if (util_parse_i64(arg, min, max, out) == 0)
		return 0;
	fprintf(stderr, "genfleet: %s: \"%s\" is not a whole number from %lld to %lld\n", name, arg,
		(long long)min, (long long)max);
	return -1;
}

/* Checks an --apps list; returns the number of apps, or -1. */
/* --part I/N, 0 <= I < N <= 4096 */
static int opt_part(const char *arg, int64_t *part, int64_t *parts)
{
	const char *slash = strchr(arg, '/');
	char first[24];

	if (!slash || (size_t)(slash - arg) >= sizeof(first)) {
		fprintf(stderr, "genfleet: --part: expected I/N, got \"%s\"\n", arg);
		return -1;
	}
	memcpy(first, arg, (size_t)(slash - arg));
	first[slash - arg] = '\0';
	if (opt_num("--part's N", slash + 1, 1, 4096, parts) || opt_num("--part's I", first, 0, *parts - 1, part))
		return -1;
	return 0;
}

/* --wait-share F, 0.05 <= F <= 0.95 */
static int opt_share(const char *arg, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || *end || !(v >= 0.05 && v <= 0.95)) {
		fprintf(stderr, "genfleet: --wait-share: expected a number from 0.05 to 0.95, got \"%s\"\n", arg);
		return -1;
	}
	*out = v;
	return 0;
}

static int check_apps(const char *list)
{
	const char *name[MAX_APPS];
	size_t len[MAX_APPS];
	int n = 0;

	for (const char *c = list, *start = list;; c++) {
		if (*c && *c != ',') {
			if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_'))
				goto bad;
			continue;
		}
		if (c == start || c - start > 32 || n == MAX_APPS)
			goto bad;
		name[n] = start;
		len[n] = (size_t)(c - start);
		for (int i = 0; i < n; i++)
			if (len[i] == len[n] && memcmp(name[i], name[n], len[n]) == 0)
				goto bad;
		n++;
		if (!*c)
			return n;
		start = c + 1;
	}
bad:
	fprintf(stderr, "genfleet: --apps: a comma-separated list of 1 to %d different names of 1 to 32 "
		"characters [a-z0-9_-]\n", MAX_APPS);
	return -1;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "streams", required_argument, NULL, 'n' },
		{ "baseline", required_argument, NULL, 'B' },
		{ "first", required_argument, NULL, 'F' },
		{ "regression-conf", no_argument, NULL, 'R' },
		{ "events", required_argument, NULL, 'm' },
		{ "hosts", required_argument, NULL, 'H' },
		{ "apps", required_argument, NULL, 'a' },
		{ "seed", required_argument, NULL, 's' },
		{ "bugs", required_argument, NULL, 'k' },
		{ "distinct-stacks", required_argument, NULL, 'D' },
		{ "depth", required_argument, NULL, 'd' },
		{ "out", required_argument, NULL, 'o' },
		{ "truth", required_argument, NULL, 't' },
		{ "validate", no_argument, NULL, 'V' },
		{ "stats", no_argument, NULL, 'S' },
		{ "part", required_argument, NULL, 'P' },
		{ "wait-share", required_argument, NULL, 'W' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct gen *g = xcalloc(1, sizeof(*g));
	struct sbuild *b = xcalloc(1, sizeof(*b));
	struct opts *o = &g->o;
	FILE *out = stdout;
	int64_t seed = 1;
	int c, rc = 2;

	*o = (struct opts){ .streams = 100, .events = 2000, .hosts = 40, .bugs = 5, .distinct = 3000,
			    .depth = 36, .apps = "checkout,search", .parts = 1 };
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'n': if (opt_num("--streams", optarg, 0, 100000000, &o->streams)) goto done; break;
		case 'B': if (opt_num("--baseline", optarg, 0, 100000000, &o->baseline)) goto done; break;
		case 'F': if (opt_num("--first", optarg, 0, 100000000, &o->first)) goto done; break;
		case 'm': if (opt_num("--events", optarg, 64, 1000000, &o->events)) goto done; break;
		case 'H': if (opt_num("--hosts", optarg, 1, 100000, &o->hosts)) goto done; break;
		case 's': if (opt_num("--seed", optarg, 0, INT64_MAX, &seed)) goto done; break;
		case 'k': if (opt_num("--bugs", optarg, 0, MAX_BUGS, &o->bugs)) goto done; break;
		case 'D': if (opt_num("--distinct-stacks", optarg, 50, 200000, &o->distinct)) goto done; break;
		case 'd': if (opt_num("--depth", optarg, 12, 200, &o->depth)) goto done; break;
		case 'a': if (check_apps(optarg) < 0) goto done; o->apps = optarg; break;
		case 'o': o->out = optarg; break;
		case 't': o->truth = optarg; break;
		case 'V': o->validate = true; break;
		case 'R': o->regression_conf = true; break;
		case 'S': o->stats = true; break;
		case 'P': if (opt_part(optarg, &o->part, &o->parts)) goto done; break;
		case 'W': if (opt_share(optarg, &o->wait_share)) goto done; break;
		case 'h':
			fputs(usage, stdout);
			rc = 0;
			goto done;
		default:
			fputs(usage, stderr);
			goto done;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "genfleet: unexpected argument \"%s\"\n%s", argv[optind], usage);
		goto done;
	}
	if (o->hosts < check_apps(o->apps)) {
		fprintf(stderr, "genfleet: --hosts: need at least one host per app\n");
		goto done;
	}
	o->seed = (uint64_t)seed;
	rc = 1;

	gen_setup(g);
	g->arena = arena_open(0);
	g->varena = arena_open(0);
	if (!g->arena || !g->varena)
		die("out of memory");
	if (o->validate) {
		struct wire_limits lim;
		wire_limits_default(&lim);
		if (!(g->parser = wire_parser_open(&lim)))
			die("out of memory");
	}
	if (o->out && !(out = fopen(o->out, "w"))) {
		fprintf(stderr, "genfleet: %s: cannot create: %s\n", o->out, strerror(errno));
		goto done;
	}
	setvbuf(out, NULL, _IOFBF, 1 << 20);
	b->g = g;
	b->events = o->events;
	for (int64_t i = o->part; i < o->streams; i += o->parts)
		stream_run(g, b, (uint32_t)(o->first + i), out);
	/* numbered after the violating ones: --baseline leaves those byte for byte */
	b->base = true;
	for (int64_t i = o->part; i < o->baseline; i += o->parts)
		stream_run(g, b, (uint32_t)(o->first + o->streams + i), out);
	if (fflush(out) != 0 || ferror(out)) {
		fprintf(stderr, "genfleet: writing the streams failed: %s\n", strerror(errno));
		goto done;
	}
	if (o->truth && truth_write(g, o->truth) < 0) {
		fprintf(stderr, "genfleet: %s: cannot write the truth: %s\n", o->truth, strerror(errno));
		goto done;
	}
	if (o->stats)
		print_stats(g);
	rc = 0;
done:
	if (out && out != stdout && fclose(out) != 0 && rc == 0) {
		fprintf(stderr, "genfleet: %s: %s\n", o->out, strerror(errno));
		rc = 1;
	}
	free(b->ev);
	free(b);
	gen_free(g);
	return rc;
}
