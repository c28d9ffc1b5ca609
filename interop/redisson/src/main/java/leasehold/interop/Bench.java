package leasehold.interop;

import io.netty.bootstrap.Bootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelOutboundHandlerAdapter;
import io.netty.channel.ChannelPromise;
import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.NettyHook;
import org.redisson.client.codec.StringCodec;
import org.redisson.client.protocol.CommandData;
import org.redisson.client.protocol.CommandsData;
import org.redisson.config.Config;
import org.redisson.config.SingleServerConfig;

/**
 * The real Redisson client measured the way leasehold's Rust benches measure leasehold
 * (benches/src/bin/hotpath.rs, contention.rs, semaphore.rs, rwlock.rs), against one
 * Redis server, so that scripts/bench-redisson.sh can print leasehold/Redisson ratios.
 *
 * <p>Parts (each its own section; {@code --only a,b} picks some):
 *
 * <ol>
 *   <li>{@code hotpath}: {@code RLock.tryLock()} + {@code unlock()} (watchdog mode, as
 *       hotpath's {@code leasehold-watchdog}) and {@code tryLock(0, 10 s)} + {@code unlock()}
 *       (fixed lease, as {@code leasehold-lease}) on a fresh key per pair: pairs/s with
 *       {@code --threads} (64) threads for {@code --seconds} (5), then {@code --pairs} (2000)
 *       sequential pairs from one thread (p50/p99), commands per pair, Redis CPU per pair.
 *   <li>{@code contention}: {@code --threads} threads of one client on one lock name, each
 *       looping {lock(10 s), hold {@code --hold-us} (1000, parkNanos), unlock()} for
 *       {@code --contention-seconds} (5), as contention's {@code --mode leasehold --clients 1};
 *       then 2 clients x 1 thread (the hand-off between two processes). Figures as
 *       contention's: acquisitions/s, wait p50/p99/max, per-thread min/max, re-win rate,
 *       hand-off (unlock returned on one thread -> the next holder's lock() returned) p50/p99
 *       and to another thread, requests per acquisition.
 *   <li>{@code semaphore}: {@code --sem-clients} (4) clients x {@code --sem-threads} (16)
 *       threads on one {@code RSemaphore} of {@code --permits} (8): acquire(), hold
 *       {@code --hold-us}, release(), for {@code --seconds}, as semaphore's {@code leasehold}
 *       contender.
 *   <li>{@code rwlock}: {@code RReadWriteLock} read and write pairs ({@code readLock().tryLock()}
 *       + unlock, {@code writeLock().tryLock()} + unlock) on distinct keys, {@code --rw-threads}
 *       (8) threads x {@code --rw-pairs} (2000), as rwlock's part 1; and its part 2a: a reader on
 *       one client releases, a writer waiting on another client gets in, 20 tries.
 * </ol>
 *
 * <p>The hold: the Rust benches hold with a 1 ms tokio sleep, which lasts about 2.1 ms (the
 * timer's 1 ms ticks); scripts/bench-redisson.sh passes the hold p50 that {@code contention}
 * measured as {@code --hold-us}, so that both clients hold the lock equally long.
 *
 * <p>Requests are counted two ways. Server side, as the Rust benches do: the {@code INFO
 * commandstats} delta (commands run inside scripts included; {@code INFO} and what this
 * program sends on its own socket left out). Client side: every command Redisson writes on
 * any of its connections (a netty handler installed through {@link Config#setNettyHook}),
 * which is the exact count of top-level requests: the server-side rule of the Rust benches
 * (leave out the commands leasehold's scripts call) would also leave out the {@code DEL} of
 * the unlock latch that Redisson sends itself after every unlock.
 *
 * <p>Redisson runs with its default configuration (connection pool 64, 24 idle at least;
 * subscription pool 50; 32 netty threads; its script cache setting; 30 s watchdog), except
 * {@code StringCodec} (locks use no codec) and the counting hook; {@code --pool N} sets the
 * command pool size (and its minimum idle) for a diagnostic run. The sizes are printed.
 *
 * <p>Exits with 1 when an invariant breaks: a distinct key not acquired, two holders
 * inside at once, more semaphore holders than permits, permits not all back, a failed call.
 *
 * <p>Usage: {@code java -cp target/redisson-peer.jar leasehold.interop.Bench [--url
 * redis://127.0.0.1:6379] [--flush] [--only hotpath,contention,semaphore,rwlock] ...}. The
 * URL defaults to {@code REDIS_URL}. {@code --flush} lets it run {@code FLUSHALL} between
 * parts (a throwaway server only).
 */
public final class Bench {
    private static final long LEASE_S = 10;
    /** Commands Redisson wrote on its connections, by name ({@code EVALSHA}, {@code DEL}, ...). */
    private static final Map<String, LongAdder> SENT = new ConcurrentHashMap<>();
    /** Every command a leasehold script calls (benches/src/lib.rs SCRIPT_COMMANDS). */
    private static final Set<String> SCRIPT_COMMANDS = Set.of(
            "decr", "decrby", "del", "exists", "get", "hdel", "hexists", "hget", "hgetall", "hincrby", "hkeys",
            "hlen", "hset", "incr", "incrby", "lindex", "lpop", "lpos", "lrem", "pexpire", "pttl", "publish",
            "rpush", "set", "spublish", "strlen", "time", "type", "zadd", "zcard", "zcount", "zrange",
            "zrangebyscore", "zrem", "zremrangebyrank", "zremrangebyscore", "zscore");
    /** What this program sends itself on its own socket (left out of the server-side counts). */
    private static final Set<String> OWN = Set.of("info", "config|resetstat", "flushall", "dbsize");

    private final Map<String, String> flags;
    private final String url;
    private final List<String> figures = new ArrayList<>();
    private final List<String> problems = new ArrayList<>();

    private Bench(Map<String, String> flags, String url) {
        this.flags = flags;
        this.url = url;
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> flags = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("--help") || a.equals("-h")) {
                System.out.println("usage: Bench [--url U] [--flush] [--only hotpath,contention,semaphore,rwlock] "
                        + "[--seconds N] [--threads N] [--pairs N] [--warmup-seconds N] [--contention-seconds N] "
                        + "[--hold-us N] [--sem-clients N] [--sem-threads N] [--permits N] [--rw-threads N] "
                        + "[--rw-pairs N] [--pool N]");
                return;
            }
            if (a.equals("--flush")) {
                flags.put(a, "1");
            } else if (a.startsWith("--") && i + 1 < args.length) {
                flags.put(a, args[++i]);
            } else {
                throw new IllegalArgumentException("unknown or incomplete argument " + a);
            }
        }
        String url = flags.getOrDefault("--url", System.getenv("REDIS_URL"));
        if (url == null || url.isEmpty()) {
            throw new IllegalArgumentException("no --url and no REDIS_URL");
        }
        Bench bench = new Bench(flags, url);
        int code = bench.run();
        System.exit(code);
    }

    private int intFlag(String name, int fallback) {
        String v = flags.get(name);
        return v == null ? fallback : Integer.parseInt(v);
    }

    private int run() throws Exception {
        Set<String> only = Set.of(flags.getOrDefault("--only", "hotpath,contention,semaphore,rwlock").split(","));
        System.out.println("# Bench: the real Redisson client, measured as leasehold's benches measure leasehold");
        try (Raw raw = new Raw(url)) {
            String server = raw.info("server");
            System.out.println("machine:");
            System.out.println("  nproc            " + Runtime.getRuntime().availableProcessors());
            System.out.println("  load average     " + loadAverage() + " (1/5/15 min, at start)");
            System.out.println("  redis_version    " + field(server, "redis_version"));
            System.out.println("  redis server     " + url);
            System.out.println("  java             " + System.getProperty("java.version") + " "
                    + System.getProperty("java.vm.name"));
            System.out.println("  redisson         " + redissonVersion());
            Config probe = config(1);
            SingleServerConfig s = probe.useSingleServer();
            System.out.println("redisson config (defaults unless said): connectionPoolSize " + s.getConnectionPoolSize()
                    + ", connectionMinimumIdleSize " + s.getConnectionMinimumIdleSize()
                    + ", subscriptionConnectionPoolSize " + s.getSubscriptionConnectionPoolSize()
                    + ", subscriptionsPerConnection " + s.getSubscriptionsPerConnection()
                    + ", nettyThreads " + probe.getNettyThreads() + ", threads " + probe.getThreads()
                    + ", useScriptCache " + probe.isUseScriptCache()
                    + ", lockWatchdogTimeout " + probe.getLockWatchdogTimeout() + " ms"
                    + ", codec StringCodec (set here)"
                    + (flags.containsKey("--pool") ? " (--pool given)" : ""));
            System.out.println("(leasehold's Client: one multiplexed command connection + one pub/sub connection)");
            if (only.contains("hotpath")) {
                hotpath(raw);
            }
            if (only.contains("contention")) {
                contention(raw);
            }
            if (only.contains("semaphore")) {
                semaphore(raw);
            }
            if (only.contains("rwlock")) {
                rwlock(raw);
            }
        }
        System.out.println();
        System.out.println("## figures (name value; read by scripts/bench-redisson.sh)");
        for (String f : figures) {
            System.out.println("figure " + f);
        }
        for (String p : problems) {
            System.out.println("INVARIANT BROKEN: " + p);
        }
        return problems.isEmpty() ? 0 : 1;
    }

    // ---------------------------------------------------------------- configuration

    private Config config(int ignored) {
        Config config = new Config();
        config.setCodec(StringCodec.INSTANCE);
        config.setNettyHook(new CountingHook());
        SingleServerConfig single = config.useSingleServer().setAddress(url);
        if (flags.containsKey("--pool")) {
            int pool = intFlag("--pool", 64);
            single.setConnectionPoolSize(pool);
            single.setConnectionMinimumIdleSize(Math.min(pool, single.getConnectionMinimumIdleSize()));
        }
        return config;
    }

    private RedissonClient client() {
        return Redisson.create(config(0));
    }

    // ---------------------------------------------------------------- part 1: hotpath

    private void hotpath(Raw raw) throws Exception {
        int threads = intFlag("--threads", 64);
        int seconds = intFlag("--seconds", 5);
        int pairs = intFlag("--pairs", 2000);
        int warmup = intFlag("--warmup-seconds", 2);
        RedissonClient redisson = client();
        try {
            for (String mode : List.of("watchdog", "lease")) {
                reset(raw);
                String tag = mode.equals("watchdog") ? "rjw" : "rjl";
                System.out.println();
                System.out.println("## hotpath " + mode + ": " + (mode.equals("watchdog")
                        ? "RLock.tryLock() + unlock() (watchdog mode)"
                        : "RLock.tryLock(0, 10, SECONDS) + unlock() (fixed lease)") + ", a fresh key per pair");
                // JIT warm-up: the same loop on other keys (the Rust benches need none).
                throughput(redisson, mode, tag + ":warm", threads, warmup);
                Snapshot before = Snapshot.take(raw);
                long start = System.nanoTime();
                long total = throughput(redisson, mode, tag, threads, seconds);
                double wall = (System.nanoTime() - start) / 1e9;
                Snapshot after = Snapshot.take(raw);
                Delta d = after.since(before);
                long[] lat = new long[pairs];
                for (int i = 0; i < pairs; i++) {
                    String key = "lock:order:" + tag + ":seq:" + i;
                    long t0 = System.nanoTime();
                    pair(redisson, mode, key);
                    lat[i] = (System.nanoTime() - t0) / 1000;
                }
                Arrays.sort(lat);
                Thread.sleep(200);
                long keysLeft = raw.integer("DBSIZE");
                double pps = total / wall;
                System.out.printf("throughput: %d pairs by %d threads in %.2f s = %.0f pairs/s (after a %d s warm-up)%n",
                        total, threads, wall, pps, warmup);
                System.out.printf("latency (%d sequential pairs, one thread): p50 %s ms, p99 %s ms, max %s ms%n",
                        pairs, ms(pct(lat, 50)), ms(pct(lat, 99)), ms(lat[lat.length - 1]));
                System.out.printf("redis commands (throughput phase, in-script included): %d = %.2f/pair: %s%n",
                        d.allCalls(), per(d.allCalls(), total), d.breakdown(total));
                System.out.printf("requests Redisson wrote: %d = %.2f/pair: %s (server-side rule of the Rust benches: %.2f/pair)%n",
                        d.sentCalls(), per(d.sentCalls(), total), d.sentBreakdown(total), per(d.ruleCalls(), total));
                System.out.printf("redis CPU: %.2f µs/pair; bench process CPU (JVM): %.2f µs/pair; DBSIZE after %d%n",
                        d.redisCpuUs / total, d.procCpuUs / total, keysLeft);
                String p = "hotpath." + mode + ".";
                figure(p + "pairs_per_s", String.format("%.0f", pps));
                figure(p + "p50_ms", ms(pct(lat, 50)));
                figure(p + "p99_ms", ms(pct(lat, 99)));
                figure(p + "commands_per_pair", String.format("%.2f", per(d.allCalls(), total)));
                figure(p + "requests_per_pair", String.format("%.2f", per(d.sentCalls(), total)));
                figure(p + "redis_cpu_us_per_pair", String.format("%.2f", d.redisCpuUs / total));
                figure(p + "process_cpu_us_per_pair", String.format("%.2f", d.procCpuUs / total));
                figure(p + "keys_left", Long.toString(keysLeft));
            }
        } finally {
            redisson.shutdown();
        }
    }

    private void pair(RedissonClient redisson, String mode, String key) throws InterruptedException {
        RLock lock = redisson.getLock(key);
        boolean got = mode.equals("watchdog") ? lock.tryLock() : lock.tryLock(0, LEASE_S, TimeUnit.SECONDS);
        if (!got) {
            throw new IllegalStateException("tryLock did not acquire the distinct key " + key);
        }
        lock.unlock();
    }

    private long throughput(RedissonClient redisson, String mode, String tag, int threads, int seconds)
            throws Exception {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        long[] counts = new long[threads];
        List<Thread> workers = new ArrayList<>();
        AtomicReferenceError error = new AtomicReferenceError();
        for (int t = 0; t < threads; t++) {
            final int task = t;
            Thread w = new Thread(() -> {
                try {
                    long n = 0;
                    while (System.nanoTime() < end) {
                        pair(redisson, mode, "lock:order:" + tag + ":" + task + ":" + n);
                        n++;
                    }
                    counts[task] = n;
                } catch (Throwable e) {
                    error.set(e);
                }
            });
            w.start();
            workers.add(w);
        }
        for (Thread w : workers) {
            w.join();
        }
        error.check();
        return Arrays.stream(counts).sum();
    }

    // ---------------------------------------------------------------- part 2: contention

    private record Hold(long seq, int task, int client, long waitUs, long holdUs, long acquired, long released) {}

    private void contention(Raw raw) throws Exception {
        int threads = intFlag("--threads", 64);
        int seconds = intFlag("--contention-seconds", 5);
        long holdUs = intFlag("--hold-us", 1000);
        calibrateHold(holdUs);
        long[] pings = raw.pings(2000);
        System.out.println();
        System.out.printf("round trips (this program's plain socket): PING p50 %s ms, p99 %s ms%n",
                ms(pct(pings, 50)), ms(pct(pings, 99)));
        figure("ping_p50_ms", ms(pct(pings, 50)));
        for (int[] shape : new int[][] {{1, threads}, {2, 1}}) {
            int clients = shape[0];
            int perClient = shape[1];
            reset(raw);
            System.out.println();
            System.out.printf("## contention: %d client(s) x %d threads on one RLock, lock(10 s) + hold %d µs (parkNanos) + unlock(), %d s%n",
                    clients, perClient, holdUs, seconds);
            List<RedissonClient> rs = new ArrayList<>();
            for (int c = 0; c < clients; c++) {
                RedissonClient r = client();
                RLock warm = r.getLock("bench:contention:warm:" + c);
                for (int i = 0; i < 200; i++) {
                    warm.lock(LEASE_S, TimeUnit.SECONDS);
                    warm.unlock();
                }
                rs.add(r);
            }
            try {
                String name = "bench:contention:redisson:" + clients + "x" + perClient;
                AtomicInteger inside = new AtomicInteger();
                AtomicLong overlaps = new AtomicLong();
                AtomicLong seqs = new AtomicLong();
                AtomicReferenceError error = new AtomicReferenceError();
                int total = clients * perClient;
                List<List<Hold>> perTask = new ArrayList<>();
                for (int t = 0; t < total; t++) {
                    perTask.add(new ArrayList<>());
                }
                Snapshot before = Snapshot.take(raw);
                long start = System.nanoTime();
                long end = start + TimeUnit.SECONDS.toNanos(seconds);
                List<Thread> workers = new ArrayList<>();
                for (int t = 0; t < total; t++) {
                    final int task = t;
                    final int client = t / perClient;
                    final RLock lock = rs.get(client).getLock(name);
                    Thread w = new Thread(() -> {
                        try {
                            List<Hold> mine = perTask.get(task);
                            while (System.nanoTime() < end) {
                                long called = System.nanoTime();
                                lock.lock(LEASE_S, TimeUnit.SECONDS);
                                long acquired = System.nanoTime();
                                if (inside.getAndIncrement() != 0) {
                                    overlaps.incrementAndGet();
                                }
                                long seq = seqs.getAndIncrement();
                                hold(acquired, holdUs);
                                long held = System.nanoTime() - acquired;
                                inside.decrementAndGet();
                                lock.unlock();
                                long released = System.nanoTime();
                                mine.add(new Hold(seq, task, client, (acquired - called) / 1000, held / 1000,
                                        acquired, released));
                            }
                        } catch (Throwable e) {
                            error.set(e);
                        }
                    });
                    w.start();
                    workers.add(w);
                }
                for (Thread w : workers) {
                    w.join();
                }
                double wall = (System.nanoTime() - start) / 1e9;
                error.check();
                Thread.sleep(500); // let the unsubscribes of the last waiters go out
                Delta d = Snapshot.take(raw).since(before);
                List<Hold> holds = new ArrayList<>();
                perTask.forEach(holds::addAll);
                holds.sort((a, b) -> Long.compare(a.seq, b.seq));
                long n = holds.size();
                long inWindow = holds.stream().filter(h -> h.acquired < end).count();
                long[] waits = holds.stream().mapToLong(Hold::waitUs).sorted().toArray();
                long[] holdTimes = holds.stream().mapToLong(Hold::holdUs).sorted().toArray();
                long[] counts = perTask.stream().mapToLong(List::size).toArray();
                long min = Arrays.stream(counts).min().orElse(0);
                long max = Arrays.stream(counts).max().orElse(0);
                List<Long> handoffs = new ArrayList<>();
                List<Long> handoffsOther = new ArrayList<>();
                long rewins = 0;
                long sameClient = 0;
                for (int i = 0; i + 1 < holds.size(); i++) {
                    Hold prev = holds.get(i);
                    Hold next = holds.get(i + 1);
                    long h = next.acquired - prev.released;
                    handoffs.add(h);
                    if (next.task == prev.task) {
                        rewins++;
                    } else {
                        handoffsOther.add(h);
                    }
                    if (next.client == prev.client) {
                        sameClient++;
                    }
                }
                long[] ho = handoffs.stream().mapToLong(Long::longValue).sorted().toArray();
                long[] hoOther = handoffsOther.stream().mapToLong(Long::longValue).sorted().toArray();
                double pairs = Math.max(1, handoffs.size());
                double rate = inWindow / (double) seconds;
                System.out.printf("%d acquisitions within the %d s run = %.0f/s; %d in all, the last one %.2f s after the start%n",
                        inWindow, seconds, rate, n, wall);
                System.out.printf("hold (lock returned -> unlock called): p50 %s ms%n", ms(pct(holdTimes, 50)));
                System.out.printf("wait (lock called -> lock returned): p50 %s ms, p99 %s ms, max %s ms%n",
                        ms(pct(waits, 50)), ms(pct(waits, 99)), ms(waits.length == 0 ? 0 : waits[waits.length - 1]));
                System.out.printf("per thread: min %d max %d acquisitions (threads with none: %d)%n", min, max,
                        Arrays.stream(counts).filter(c -> c == 0).count());
                System.out.printf("handoff (unlock returned -> next lock returned): p50 %s ms, p99 %s ms; to another thread: p50 %s ms, p99 %s ms (%d of %d hand-offs)%n",
                        msNs(pct(ho, 50)), msNs(pct(ho, 99)), msNs(pct(hoOther, 50)), msNs(pct(hoOther, 99)),
                        hoOther.length, ho.length);
                System.out.printf("re-win (releasing thread holds next): %.1f%%; next holder on the same client: %.1f%%%n",
                        100 * rewins / pairs, 100 * sameClient / pairs);
                System.out.printf("requests Redisson wrote: %d = %.2f/acquisition: %s%n", d.sentCalls(),
                        per(d.sentCalls(), n), d.sentBreakdown(n));
                System.out.printf("redis commands (INFO commandstats delta): server-side rule of the Rust benches (in-script names left out) %.2f/acquisition; all incl. in-script %.2f/acquisition: %s%n",
                        per(d.ruleCalls(), n), per(d.allCalls(), n), d.breakdown(n));
                System.out.printf("overlaps (must be 0): %d%n", overlaps.get());
                if (overlaps.get() > 0) {
                    problems.add("contention " + clients + "x" + perClient + ": " + overlaps.get()
                            + " acquisitions found another holder inside");
                }
                String p = "contention." + clients + "x" + perClient + ".";
                figure(p + "rate", String.format("%.0f", rate));
                figure(p + "hold_p50_ms", ms(pct(holdTimes, 50)));
                figure(p + "wait_p50_ms", ms(pct(waits, 50)));
                figure(p + "wait_p99_ms", ms(pct(waits, 99)));
                figure(p + "task_min", Long.toString(min));
                figure(p + "task_max", Long.toString(max));
                figure(p + "task_min_max", String.format("%.2f", max == 0 ? 0.0 : min / (double) max));
                figure(p + "rewin_pct", String.format("%.1f", 100 * rewins / pairs));
                figure(p + "handoff_p50_ms", msNs(pct(ho, 50)));
                figure(p + "handoff_other_p50_ms", msNs(pct(hoOther, 50)));
                figure(p + "handoff_other_p99_ms", msNs(pct(hoOther, 99)));
                figure(p + "requests_per_acq", String.format("%.2f", per(d.sentCalls(), n)));
                figure(p + "rule_requests_per_acq", String.format("%.2f", per(d.ruleCalls(), n)));
                figure(p + "all_commands_per_acq", String.format("%.2f", per(d.allCalls(), n)));
            } finally {
                rs.forEach(RedissonClient::shutdown);
            }
        }
    }

    // ---------------------------------------------------------------- part 3: semaphore

    private void semaphore(Raw raw) throws Exception {
        int clients = intFlag("--sem-clients", 4);
        int threads = intFlag("--sem-threads", 16);
        int permits = intFlag("--permits", 8);
        int seconds = intFlag("--seconds", 5);
        long holdUs = intFlag("--hold-us", 1000);
        calibrateHold(holdUs);
        reset(raw);
        System.out.println();
        System.out.printf("## semaphore: %d clients x %d threads on one RSemaphore of %d permits: acquire(), hold %d µs (parkNanos), release(), %d s%n",
                clients, threads, permits, holdUs, seconds);
        String name = "bench:semaphore:redisson";
        List<RedissonClient> rs = new ArrayList<>();
        for (int c = 0; c < clients; c++) {
            RedissonClient r = client();
            // Warm the connections and the JIT on another semaphore.
            RSemaphore warm = r.getSemaphore("bench:semaphore:warm:" + c);
            warm.trySetPermits(1);
            for (int i = 0; i < 200; i++) {
                warm.acquire();
                warm.release();
            }
            rs.add(r);
        }
        try {
            raw.call("DEL", name);
            if (!rs.get(0).getSemaphore(name).trySetPermits(permits)) {
                throw new IllegalStateException("the semaphore was already set");
            }
            AtomicInteger inside = new AtomicInteger();
            AtomicBoolean overlap = new AtomicBoolean();
            AtomicReferenceError error = new AtomicReferenceError();
            long[] counts = new long[clients * threads];
            Snapshot before = Snapshot.take(raw);
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < clients * threads; t++) {
                final int task = t;
                final RSemaphore sem = rs.get(t / threads).getSemaphore(name);
                Thread w = new Thread(() -> {
                    try {
                        long n = 0;
                        while (System.nanoTime() < end) {
                            sem.acquire();
                            if (inside.incrementAndGet() > permits) {
                                overlap.set(true);
                            }
                            hold(System.nanoTime(), holdUs);
                            inside.decrementAndGet();
                            sem.release();
                            n++;
                        }
                        counts[task] = n;
                    } catch (Throwable e) {
                        error.set(e);
                    }
                });
                w.start();
                workers.add(w);
            }
            for (Thread w : workers) {
                w.join();
            }
            error.check();
            Thread.sleep(500);
            Delta d = Snapshot.take(raw).since(before);
            int left = rs.get(0).getSemaphore(name).availablePermits();
            if (left != permits) {
                problems.add("semaphore: " + left + " permits at the end, not " + permits);
            }
            if (overlap.get()) {
                problems.add("semaphore: more threads inside than permits");
            }
            long total = Arrays.stream(counts).sum();
            long min = Arrays.stream(counts).min().orElse(0);
            long max = Arrays.stream(counts).max().orElse(0);
            double ratio = max == 0 ? 0 : min / (double) max;
            System.out.printf("acquisitions %d (%.0f/s); per thread min %d max %d min/max %.2f; permits at the end %d%n",
                    total, total / (double) seconds, min, max, ratio, left);
            System.out.printf("requests Redisson wrote: %d = %.2f/acquisition (a release is one): %s%n", d.sentCalls(),
                    per(d.sentCalls(), total), d.sentBreakdown(total));
            System.out.printf("redis commands (INFO commandstats delta): server-side rule of the Rust benches %d = %.2f/acquisition; all incl. in-script %.2f/acquisition: %s%n",
                    d.ruleCalls(), per(d.ruleCalls(), total), per(d.allCalls(), total), d.breakdown(total));
            figure("semaphore.acquisitions", Long.toString(total));
            figure("semaphore.rate", String.format("%.0f", total / (double) seconds));
            figure("semaphore.task_min", Long.toString(min));
            figure("semaphore.task_max", Long.toString(max));
            figure("semaphore.task_min_max", String.format("%.2f", ratio));
            figure("semaphore.requests_per_acq", String.format("%.2f", per(d.sentCalls(), total)));
            figure("semaphore.rule_requests_per_acq", String.format("%.2f", per(d.ruleCalls(), total)));
        } finally {
            rs.forEach(RedissonClient::shutdown);
        }
    }

    // ---------------------------------------------------------------- part 4: rwlock

    private void rwlock(Raw raw) throws Exception {
        int threads = intFlag("--rw-threads", 8);
        int pairs = intFlag("--rw-pairs", 2000);
        RedissonClient a = client();
        RedissonClient b = client();
        try {
            for (String mode : List.of("read", "write")) {
                reset(raw);
                System.out.println();
                System.out.printf("## rwlock %s pairs: RReadWriteLock.%sLock().tryLock() + unlock(), %d threads x %d pairs, distinct keys%n",
                        mode, mode, threads, pairs);
                String tag = mode.equals("read") ? "jr" : "jw";
                rwPairs(a, mode, tag + ":warm", threads, Math.max(200, pairs / 4)); // JIT and connections
                Snapshot before = Snapshot.take(raw);
                long start = System.nanoTime();
                long[] lat = rwPairs(a, mode, tag, threads, pairs);
                double wall = (System.nanoTime() - start) / 1e9;
                Delta d = Snapshot.take(raw).since(before);
                Thread.sleep(200);
                long keysLeft = raw.integer("DBSIZE");
                long n = lat.length;
                System.out.printf("%d pairs in %.2f s = %.0f pairs/s; pair p50 %s ms, p99 %s ms%n", n, wall, n / wall,
                        ms(pct(lat, 50)), ms(pct(lat, 99)));
                System.out.printf("redis commands (in-script included): %.2f/pair: %s; redis CPU %.2f µs/pair%n",
                        per(d.allCalls(), n), d.breakdown(n), d.redisCpuUs / n);
                System.out.printf("requests Redisson wrote: %.2f/pair: %s; DBSIZE after %d%n", per(d.sentCalls(), n),
                        d.sentBreakdown(n), keysLeft);
                String p = "rwlock." + mode + ".";
                figure(p + "pairs_per_s", String.format("%.0f", n / wall));
                figure(p + "p50_ms", ms(pct(lat, 50)));
                figure(p + "p99_ms", ms(pct(lat, 99)));
                figure(p + "commands_per_pair", String.format("%.2f", per(d.allCalls(), n)));
                figure(p + "requests_per_pair", String.format("%.2f", per(d.sentCalls(), n)));
                figure(p + "redis_cpu_us_per_pair", String.format("%.2f", d.redisCpuUs / n));
                figure(p + "keys_left", Long.toString(keysLeft));
            }
            reset(raw);
            System.out.println();
            System.out.println("## rwlock one hand-off: a reader (client 1) releases, a writer waiting (client 2) gets in; 20 tries");
            long[] ho = new long[20];
            for (int i = 0; i < ho.length; i++) {
                String name = "rw:bench:handoff:" + i;
                RReadWriteLock ra = a.getReadWriteLock(name);
                ra.readLock().lock();
                long[] got = new long[1];
                AtomicReferenceError error = new AtomicReferenceError();
                Thread writer = new Thread(() -> {
                    try {
                        RLock w = b.getReadWriteLock(name).writeLock();
                        w.lock();
                        got[0] = System.nanoTime();
                        w.unlock();
                    } catch (Throwable e) {
                        error.set(e);
                    }
                });
                writer.start();
                Thread.sleep(50); // the writer tried, was refused and subscribed
                ra.readLock().unlock();
                long released = System.nanoTime();
                writer.join();
                error.check();
                ho[i] = Math.max(0, got[0] - released) / 1000;
            }
            Arrays.sort(ho);
            System.out.printf("reader unlock() returned -> writer's lock() returned: p50 %s ms, max %s ms%n",
                    ms(pct(ho, 50)), ms(ho[ho.length - 1]));
            figure("rwlock.handoff_p50_ms", ms(pct(ho, 50)));
        } finally {
            a.shutdown();
            b.shutdown();
        }
    }

    private long[] rwPairs(RedissonClient redisson, String mode, String tag, int threads, int pairs) throws Exception {
        long[][] lat = new long[threads][pairs];
        AtomicReferenceError error = new AtomicReferenceError();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final int task = t;
            Thread w = new Thread(() -> {
                try {
                    for (int n = 0; n < pairs; n++) {
                        String name = "rw:bench:" + tag + ":" + task + ":" + n;
                        long t0 = System.nanoTime();
                        RReadWriteLock rw = redisson.getReadWriteLock(name);
                        RLock lock = mode.equals("read") ? rw.readLock() : rw.writeLock();
                        if (!lock.tryLock()) {
                            throw new IllegalStateException(mode + " tryLock did not acquire the distinct key " + name);
                        }
                        lock.unlock();
                        lat[task][n] = (System.nanoTime() - t0) / 1000;
                    }
                } catch (Throwable e) {
                    error.set(e);
                }
            });
            w.start();
            workers.add(w);
        }
        for (Thread w : workers) {
            w.join();
        }
        error.check();
        long[] all = Arrays.stream(lat).flatMapToLong(Arrays::stream).toArray();
        Arrays.sort(all);
        return all;
    }

    // ---------------------------------------------------------------- helpers

    /** {@code FLUSHALL} (with {@code --flush} only), {@code CONFIG RESETSTAT} and a moment. */
    private void reset(Raw raw) throws Exception {
        if (flags.containsKey("--flush")) {
            raw.call("FLUSHALL", "SYNC");
        }
        raw.call("CONFIG", "RESETSTAT");
        Thread.sleep(300);
    }

    /** What {@code parkNanos} oversleeps, median (measured once, before the holds). */
    private static volatile long parkOvershootNs;

    /** Measures {@link #parkOvershootNs} over 100 parks of {@code holdUs}. */
    private static void calibrateHold(long holdUs) {
        parkOvershootNs = 0;
        long[] over = new long[100];
        for (int i = 0; i < over.length; i++) {
            long from = System.nanoTime();
            java.util.concurrent.locks.LockSupport.parkNanos(holdUs * 1000);
            over[i] = System.nanoTime() - from - holdUs * 1000;
        }
        Arrays.sort(over);
        parkOvershootNs = Math.max(0, Math.min(over[50], holdUs * 500));
        System.out.printf("hold calibration: parkNanos(%d µs) oversleeps %.3f ms (median of 100), taken off each hold%n",
                holdUs, parkOvershootNs / 1e6);
    }

    /**
     * Holds until {@code holdUs} after {@code from} (parkNanos, not Thread.sleep, whose
     * millisecond rounding could not match the hold the Rust benches measure).
     */
    private static void hold(long from, long holdUs) {
        long until = from + holdUs * 1000 - parkOvershootNs;
        long left;
        while ((left = until - System.nanoTime()) > 0) {
            java.util.concurrent.locks.LockSupport.parkNanos(left);
        }
    }

    private void figure(String name, String value) {
        figures.add(name + " " + value);
    }

    private static String redissonVersion() {
        Package p = Redisson.class.getPackage();
        String v = p == null ? null : p.getImplementationVersion();
        return v == null ? "4.7.0 (pom)" : v;
    }

    private static String loadAverage() {
        try {
            String text = new String(java.nio.file.Files.readAllBytes(java.nio.file.Path.of("/proc/loadavg")));
            String[] f = text.trim().split("\\s+");
            return f[0] + " " + f[1] + " " + f[2];
        } catch (IOException e) {
            return "unknown";
        }
    }

    static String field(String info, String name) {
        for (String line : info.split("\r?\n")) {
            if (line.startsWith(name + ":")) {
                return line.substring(name.length() + 1).trim();
            }
        }
        return "unknown";
    }

    /** Nearest-rank percentile of sorted values (benches/src/lib.rs {@code percentile}). */
    static long pct(long[] sorted, double p) {
        if (sorted.length == 0) {
            return 0;
        }
        int rank = (int) Math.ceil(p / 100.0 * sorted.length);
        return sorted[Math.max(1, Math.min(rank, sorted.length)) - 1];
    }

    static String ms(long us) {
        return String.format("%.3f", us / 1000.0);
    }

    static String msNs(long ns) {
        return String.format("%.3f", ns / 1_000_000.0);
    }

    static double per(long calls, long n) {
        return calls / (double) Math.max(1, n);
    }

    /** The first error any worker thread met; {@link #check} rethrows it. */
    static final class AtomicReferenceError {
        private final java.util.concurrent.atomic.AtomicReference<Throwable> first =
                new java.util.concurrent.atomic.AtomicReference<>();

        void set(Throwable e) {
            first.compareAndSet(null, e);
        }

        void check() throws Exception {
            Throwable e = first.get();
            if (e != null) {
                throw new IllegalStateException("a worker failed: " + e, e);
            }
        }
    }

    // ---------------------------------------------------------------- counting

    /** Installs {@link Counter} on every connection Redisson opens (commands and pub/sub). */
    static final class CountingHook implements NettyHook {
        private static final Counter COUNTER = new Counter();

        @Override
        public void afterBoostrapInitialization(Bootstrap bootstrap) {}

        @Override
        public void afterChannelInitialization(Channel channel) {
            // Last in the pipeline = first to see an outbound write: Redisson's command
            // objects, before its encoders turn them into bytes.
            channel.pipeline().addLast("leasehold-bench-counter", COUNTER);
            if (System.getenv("BENCH_DEBUG") != null) {
                System.err.println("pipeline: " + channel.pipeline().names());
            }
        }
    }

    /** Counts every command object written on a Redisson connection, by name. */
    @ChannelHandler.Sharable
    static final class Counter extends ChannelOutboundHandlerAdapter {
        /** The command objects already counted (by identity: they override neither equals nor hashCode). */
        private static final Map<Object, Boolean> SEEN = java.util.Collections.synchronizedMap(new java.util.WeakHashMap<>());

        @Override
        public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) throws Exception {
            if (SEEN.put(msg, Boolean.TRUE) != null) {
                // Written again through the pipeline (Redisson's pub/sub queue re-writes a
                // command it held back): one command, counted once.
            } else if (msg instanceof CommandData<?, ?> data) {
                count(data);
            } else if (msg instanceof CommandsData batch) {
                for (CommandData<?, ?> data : batch.getCommands()) {
                    count(data);
                }
            } else {
                SENT.computeIfAbsent("?" + msg.getClass().getSimpleName(), k -> new LongAdder()).increment();
            }
            super.write(ctx, msg, promise);
        }

        private static void count(CommandData<?, ?> data) {
            String name = data.getCommand().getName().toLowerCase();
            String sub = data.getCommand().getSubName();
            if (sub != null && !sub.isEmpty() && (name.equals("script") || name.equals("client") || name.equals("config"))) {
                name = name + "|" + sub.toLowerCase();
            }
            SENT.computeIfAbsent(name, k -> new LongAdder()).increment();
        }
    }

    static Map<String, Long> sentNow() {
        Map<String, Long> now = new TreeMap<>();
        SENT.forEach((k, v) -> now.put(k, v.sum()));
        return now;
    }

    /** Server commandstats, Redis CPU, this process's CPU and Redisson's sent commands, at one moment. */
    record Snapshot(Map<String, Long> calls, double redisCpuUs, double procCpuUs, Map<String, Long> sent) {
        static Snapshot take(Raw raw) throws IOException {
            Map<String, Long> calls = new TreeMap<>();
            for (String line : raw.info("commandstats").split("\r?\n")) {
                if (!line.startsWith("cmdstat_")) {
                    continue;
                }
                int colon = line.indexOf(':');
                String name = line.substring("cmdstat_".length(), colon);
                for (String f : line.substring(colon + 1).split(",")) {
                    if (f.startsWith("calls=")) {
                        calls.put(name, Long.parseLong(f.substring(6)));
                    }
                }
            }
            String cpu = raw.info("cpu");
            double redisCpu = (Double.parseDouble(field(cpu, "used_cpu_sys")) + Double.parseDouble(field(cpu, "used_cpu_user")))
                    * 1e6;
            double proc = 0;
            if (ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.OperatingSystemMXBean os) {
                proc = os.getProcessCpuTime() / 1000.0;
            }
            return new Snapshot(calls, redisCpu, proc, sentNow());
        }

        Delta since(Snapshot before) {
            Map<String, Long> d = new TreeMap<>();
            calls.forEach((k, v) -> {
                long x = v - before.calls.getOrDefault(k, 0L);
                if (x > 0 && !OWN.contains(k)) {
                    d.put(k, x);
                }
            });
            Map<String, Long> s = new TreeMap<>();
            sent.forEach((k, v) -> {
                long x = v - before.sent.getOrDefault(k, 0L);
                if (x > 0) {
                    s.put(k, x);
                }
            });
            return new Delta(d, s, redisCpuUs - before.redisCpuUs, procCpuUs - before.procCpuUs);
        }
    }

    /** What ran between two snapshots. */
    record Delta(Map<String, Long> calls, Map<String, Long> sent, double redisCpuUs, double procCpuUs) {
        long allCalls() {
            return calls.values().stream().mapToLong(Long::longValue).sum();
        }

        /** The Rust benches' top-level rule: every command but those leasehold's scripts call. */
        long ruleCalls() {
            return calls.entrySet().stream().filter(e -> !SCRIPT_COMMANDS.contains(e.getKey()))
                    .mapToLong(Map.Entry::getValue).sum();
        }

        long sentCalls() {
            return sent.values().stream().mapToLong(Long::longValue).sum();
        }

        String breakdown(long n) {
            return format(calls, n);
        }

        String sentBreakdown(long n) {
            return format(sent, n);
        }

        private static String format(Map<String, Long> m, long n) {
            List<Map.Entry<String, Long>> entries = new ArrayList<>(m.entrySet());
            entries.sort((a, b) -> b.getValue().compareTo(a.getValue()) != 0 ? b.getValue().compareTo(a.getValue())
                    : a.getKey().compareTo(b.getKey()));
            StringBuilder out = new StringBuilder();
            for (Map.Entry<String, Long> e : entries) {
                if (out.length() > 0) {
                    out.append(' ');
                }
                out.append(e.getKey()).append('=').append(String.format("%.2f", per(e.getValue(), n)));
            }
            return out.toString();
        }
    }

    // ---------------------------------------------------------------- a plain socket for INFO

    /**
     * A minimal RESP client on its own socket: INFO, CONFIG RESETSTAT, FLUSHALL, DBSIZE, PING.
     * Kept apart from Redisson so that what the bench asks never counts as Redisson's.
     */
    static final class Raw implements AutoCloseable {
        private final Socket socket;
        private final InputStream in;
        private final OutputStream out;

        Raw(String url) throws IOException {
            URI uri = URI.create(url);
            socket = new Socket(uri.getHost(), uri.getPort() == -1 ? 6379 : uri.getPort());
            socket.setTcpNoDelay(true);
            in = new BufferedInputStream(socket.getInputStream());
            out = socket.getOutputStream();
            String user = uri.getUserInfo();
            if (user != null && !user.isEmpty()) {
                int colon = user.indexOf(':');
                if (colon < 0) {
                    call("AUTH", user);
                } else if (colon == 0) {
                    call("AUTH", user.substring(1));
                } else {
                    call("AUTH", user.substring(0, colon), user.substring(colon + 1));
                }
            }
        }

        Object call(String... args) throws IOException {
            StringBuilder b = new StringBuilder();
            b.append('*').append(args.length).append("\r\n");
            for (String a : args) {
                byte[] bytes = a.getBytes(StandardCharsets.UTF_8);
                b.append('$').append(bytes.length).append("\r\n").append(a).append("\r\n");
            }
            out.write(b.toString().getBytes(StandardCharsets.UTF_8));
            out.flush();
            return read();
        }

        String info(String section) throws IOException {
            return (String) call("INFO", section);
        }

        long integer(String... args) throws IOException {
            return (Long) call(args);
        }

        long[] pings(int count) throws IOException {
            long[] rtts = new long[count];
            for (int i = 0; i < count; i++) {
                long t0 = System.nanoTime();
                call("PING");
                rtts[i] = (System.nanoTime() - t0) / 1000;
            }
            Arrays.sort(rtts);
            return rtts;
        }

        private Object read() throws IOException {
            int type = in.read();
            String line = line();
            switch (type) {
                case '+':
                    return line;
                case '-':
                    throw new IOException("redis error: " + line);
                case ':':
                    return Long.parseLong(line);
                case '$': {
                    int len = Integer.parseInt(line);
                    if (len < 0) {
                        return null;
                    }
                    byte[] data = in.readNBytes(len + 2);
                    return new String(data, 0, len, StandardCharsets.UTF_8);
                }
                case '*': {
                    int len = Integer.parseInt(line);
                    List<Object> items = new ArrayList<>();
                    for (int i = 0; i < len; i++) {
                        items.add(read());
                    }
                    return items;
                }
                default:
                    throw new IOException("unexpected reply type " + type);
            }
        }

        private String line() throws IOException {
            StringBuilder b = new StringBuilder();
            int c;
            while ((c = in.read()) != -1) {
                if (c == '\r') {
                    in.read();
                    break;
                }
                b.append((char) c);
            }
            return b.toString();
        }

        @Override
        public void close() throws IOException {
            socket.close();
        }
    }
}
