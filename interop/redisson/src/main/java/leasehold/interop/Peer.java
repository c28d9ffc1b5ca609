package leasehold.interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.RedissonMultiLock;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.ClusterServersConfig;
import org.redisson.config.Config;

/**
 * The real Redisson client, scripted line by line by leasehold's interop tests
 * (tests/redisson_java.rs through tests/support/src/redisson_java.rs).
 *
 * <h2>Protocol</h2>
 * Every input line is {@code HANDLE VERB ARGS...} (space separated; names hold no spaces).
 * HANDLE is any word the test chooses except {@code event}. Each handle has ONE dedicated
 * thread, created on first use: its commands run on it in the order sent, so a lock taken
 * by {@code h1} is owned by h1's thread (Redisson's owner field {@code CLIENT_ID:THREAD_ID})
 * and {@code h1 unlock ...} releases it with Redisson's reentrancy semantics. The reader
 * never blocks on a command: while {@code h1 lock lock x} waits, {@code h2 ...} runs.
 * Every command gets exactly one reply line, tagged with its handle:
 * <pre>
 *   HANDLE ok [RESULT]                 (true|false, a number, a token, a permit id, null)
 *   HANDLE err EXCEPTION_CLASS MESSAGE (the Java exception, e.g. IllegalMonitorStateException)
 * </pre>
 * and, before it, one asynchronous line when the command starts on the handle's thread
 * (so a test knows a blocking call is under way): {@code event begin HANDLE VERB}.
 * Times are milliseconds; a lease of -1 means "no lease" (Redisson's watchdog mode).
 *
 * <h2>Verbs</h2>
 * <pre>
 * connect single URL [watchdog=MS] [fairwait=MS]     one RedissonClient for the process
 * connect cluster URL,URL,... [watchdog=MS] [fairwait=MS]
 * id                                -> the client id (UUID), the first half of owner fields
 * owner                             -> CLIENT_ID:THREAD_ID of this handle's thread
 * shutdown                          -> RedissonClient.shutdown()
 * -- KIND is lock (getLock), fair (getFairLock), fenced (getFencedLock), spin (getSpinLock),
 * -- read / write (getReadWriteLock(NAME).readLock() / .writeLock())
 * lock KIND NAME [LEASE]            -> lock() / lock(lease); fenced: lockAndGetToken -> TOKEN
 * trylock KIND NAME WAIT [LEASE]    -> tryLock(wait[, lease]) -> true|false;
 *                                      fenced: tryLockAndGetToken -> TOKEN|null;
 *                                      WAIT -1: tryLock() (one attempt)
 * unlock KIND NAME                  -> unlock()
 * forceunlock KIND NAME             -> forceUnlock() -> true|false
 * islocked KIND NAME                -> isLocked()
 * held KIND NAME                    -> isHeldByCurrentThread()
 * holdcount KIND NAME               -> getHoldCount()
 * ttl KIND NAME                     -> remainTimeToLive()
 * token NAME                        -> RFencedLock.getToken()
 * sem.set NAME N                    -> RSemaphore.trySetPermits(N)
 * sem.acquire NAME N                -> acquire(N)
 * sem.try NAME N WAIT               -> tryAcquire(N, wait) -> true|false
 * sem.release NAME N                -> release(N)
 * sem.available NAME                -> availablePermits()
 * pes.set NAME N                    -> RPermitExpirableSemaphore.trySetPermits(N)
 * pes.acquire NAME LEASE            -> acquire() / acquire(lease) -> PERMIT_ID
 * pes.try NAME WAIT LEASE           -> tryAcquire(wait, lease) (-1 lease: tryAcquire(wait))
 *                                      -> PERMIT_ID|null
 * pes.release NAME ID               -> release(id)
 * pes.tryrelease NAME ID            -> tryRelease(id) -> true|false
 * pes.available NAME                -> availablePermits()
 * latch.set NAME N                  -> RCountDownLatch.trySetCount(N)
 * latch.down NAME                   -> countDown()
 * latch.await NAME TIMEOUT          -> await(timeout) -> true|false
 * latch.count NAME                  -> getCount()
 * multi.lock NAME,NAME,.. [LEASE]   -> new RedissonMultiLock(getLock each).lock(...)
 * multi.trylock NAMES WAIT [LEASE]  -> tryLock(wait[, lease]) -> true|false
 * multi.unlock NAMES                -> unlock()
 * exit                              -> ends the process (status 0) without a reply
 * </pre>
 * Logs (slf4j-simple, level warn) go to stderr, never to stdout.
 */
public final class Peer {
    private static final PrintStream OUT =
            new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
    private static final Map<String, ExecutorService> HANDLES = new ConcurrentHashMap<>();
    private static volatile RedissonClient client;

    private Peer() {}

    public static void main(String[] args) throws Exception {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel",
                System.getProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn"));
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        // Nothing else may write to stdout: it is the protocol.
        System.setOut(System.err);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            String[] words = line.split("\\s+");
            if (words.length == 2 && words[1].equals("exit")) {
                break;
            }
            if (words.length < 2 || words[0].equals("event")) {
                emit((words.length > 0 ? words[0] : "?") + " err java.lang.IllegalArgumentException bad line: " + line);
                continue;
            }
            String handle = words[0];
            String[] command = Arrays.copyOfRange(words, 1, words.length);
            HANDLES.computeIfAbsent(handle, Peer::handleThread).execute(() -> run(handle, command));
        }
        // stdin closed (the test ended or dropped us): exit at once, even with threads
        // still blocked in Redisson calls.
        Runtime.getRuntime().halt(0);
    }

    private static ExecutorService handleThread(String handle) {
        return Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "handle-" + handle);
            t.setDaemon(true);
            return t;
        });
    }

    private static void emit(String line) {
        synchronized (OUT) {
            OUT.print(line);
            OUT.print('\n');
            OUT.flush();
        }
    }

    private static void run(String handle, String[] command) {
        emit("event begin " + handle + " " + command[0]);
        String reply;
        try {
            Object result = execute(command);
            reply = result == null ? "ok" : "ok " + result;
        } catch (Throwable e) {
            Throwable shown = e;
            String message = String.valueOf(shown.getMessage()).replace('\n', ' ').replace('\r', ' ');
            reply = "err " + shown.getClass().getName() + " " + message;
        }
        emit(handle + " " + reply);
    }

    private static long num(String[] c, int i) {
        return Long.parseLong(c[i]);
    }

    private static long opt(String[] c, int i) {
        return c.length > i ? Long.parseLong(c[i]) : -1;
    }

    private static RedissonClient client() {
        RedissonClient c = client;
        if (c == null) {
            throw new IllegalStateException("not connected: send connect first");
        }
        return c;
    }

    private static RLock lock(String kind, String name) {
        RedissonClient c = client();
        switch (kind) {
            case "lock": return c.getLock(name);
            case "fair": return c.getFairLock(name);
            case "fenced": return c.getFencedLock(name);
            case "spin": return c.getSpinLock(name);
            case "read": return c.getReadWriteLock(name).readLock();
            case "write": return c.getReadWriteLock(name).writeLock();
            default: throw new IllegalArgumentException("unknown lock kind " + kind);
        }
    }

    private static RedissonMultiLock multi(String names) {
        List<RLock> locks = new ArrayList<>();
        for (String name : names.split(",")) {
            locks.add(client().getLock(name));
        }
        return new RedissonMultiLock(locks.toArray(new RLock[0]));
    }

    private static Object execute(String[] c) throws Exception {
        String verb = c[0];
        switch (verb) {
            case "connect": return connect(c);
            case "id": return client().getId();
            case "owner": return client().getId() + ":" + Thread.currentThread().getId();
            case "shutdown": client().shutdown(); return null;
            case "lock": {
                RLock l = lock(c[1], c[2]);
                long lease = opt(c, 3);
                if (l instanceof RFencedLock) {
                    RFencedLock f = (RFencedLock) l;
                    return lease < 0 ? f.lockAndGetToken() : f.lockAndGetToken(lease, TimeUnit.MILLISECONDS);
                }
                if (lease < 0) {
                    l.lock();
                } else {
                    l.lock(lease, TimeUnit.MILLISECONDS);
                }
                return null;
            }
            case "trylock": {
                RLock l = lock(c[1], c[2]);
                long wait = num(c, 3);
                long lease = opt(c, 4);
                if (l instanceof RFencedLock) {
                    RFencedLock f = (RFencedLock) l;
                    if (wait < 0) {
                        return String.valueOf(f.tryLockAndGetToken());
                    }
                    return String.valueOf(lease < 0
                            ? f.tryLockAndGetToken(wait, TimeUnit.MILLISECONDS)
                            : f.tryLockAndGetToken(wait, lease, TimeUnit.MILLISECONDS));
                }
                if (wait < 0) {
                    return l.tryLock();
                }
                return lease < 0 ? l.tryLock(wait, TimeUnit.MILLISECONDS) : l.tryLock(wait, lease, TimeUnit.MILLISECONDS);
            }
            case "unlock": lock(c[1], c[2]).unlock(); return null;
            case "forceunlock": return lock(c[1], c[2]).forceUnlock();
            case "islocked": return lock(c[1], c[2]).isLocked();
            case "held": return lock(c[1], c[2]).isHeldByCurrentThread();
            case "holdcount": return lock(c[1], c[2]).getHoldCount();
            case "ttl": return lock(c[1], c[2]).remainTimeToLive();
            case "token": return client().getFencedLock(c[1]).getToken();

            case "sem.set": return sem(c).trySetPermits((int) num(c, 2));
            case "sem.acquire": sem(c).acquire((int) num(c, 2)); return null;
            case "sem.try": return sem(c).tryAcquire((int) num(c, 2), num(c, 3), TimeUnit.MILLISECONDS);
            case "sem.release": sem(c).release((int) num(c, 2)); return null;
            case "sem.available": return sem(c).availablePermits();

            case "pes.set": return pes(c).trySetPermits((int) num(c, 2));
            case "pes.acquire": {
                long lease = opt(c, 2);
                return lease < 0 ? pes(c).acquire() : pes(c).acquire(lease, TimeUnit.MILLISECONDS);
            }
            case "pes.try": {
                long wait = num(c, 2);
                long lease = opt(c, 3);
                return String.valueOf(lease < 0
                        ? pes(c).tryAcquire(wait, TimeUnit.MILLISECONDS)
                        : pes(c).tryAcquire(wait, lease, TimeUnit.MILLISECONDS));
            }
            case "pes.release": pes(c).release(c[2]); return null;
            case "pes.tryrelease": return pes(c).tryRelease(c[2]);
            case "pes.available": return pes(c).availablePermits();

            case "latch.set": return latch(c).trySetCount(num(c, 2));
            case "latch.down": latch(c).countDown(); return null;
            case "latch.await": return latch(c).await(num(c, 2), TimeUnit.MILLISECONDS);
            case "latch.count": return latch(c).getCount();

            case "multi.lock": {
                long lease = opt(c, 2);
                if (lease < 0) {
                    multi(c[1]).lock();
                } else {
                    multi(c[1]).lock(lease, TimeUnit.MILLISECONDS);
                }
                return null;
            }
            case "multi.trylock": {
                long wait = num(c, 2);
                long lease = opt(c, 3);
                return lease < 0 ? multi(c[1]).tryLock(wait, TimeUnit.MILLISECONDS)
                        : multi(c[1]).tryLock(wait, lease, TimeUnit.MILLISECONDS);
            }
            case "multi.unlock": multi(c[1]).unlock(); return null;
            default: throw new IllegalArgumentException("unknown verb " + verb);
        }
    }

    private static RSemaphore sem(String[] c) {
        return client().getSemaphore(c[1]);
    }

    private static RPermitExpirableSemaphore pes(String[] c) {
        return client().getPermitExpirableSemaphore(c[1]);
    }

    private static RCountDownLatch latch(String[] c) {
        return client().getCountDownLatch(c[1]);
    }

    private static synchronized Object connect(String[] c) {
        if (client != null) {
            throw new IllegalStateException("already connected");
        }
        Config config = new Config();
        config.setCodec(StringCodec.INSTANCE);
        for (int i = 3; i < c.length; i++) {
            String[] kv = c[i].split("=", 2);
            long value = Long.parseLong(kv[1]);
            switch (kv[0]) {
                case "watchdog": config.setLockWatchdogTimeout(value); break;
                case "fairwait": config.setFairLockWaitTimeout(value); break;
                default: throw new IllegalArgumentException("unknown option " + kv[0]);
            }
        }
        switch (c[1]) {
            case "single":
                config.useSingleServer().setAddress(c[2]).setConnectionMinimumIdleSize(2)
                        .setSubscriptionConnectionMinimumIdleSize(1);
                break;
            case "cluster": {
                ClusterServersConfig cluster = config.useClusterServers();
                for (String node : c[2].split(",")) {
                    cluster.addNodeAddress(node);
                }
                cluster.setMasterConnectionMinimumIdleSize(2).setSlaveConnectionMinimumIdleSize(1)
                        .setSubscriptionConnectionMinimumIdleSize(1);
                break;
            }
            default: throw new IllegalArgumentException("connect single|cluster, not " + c[1]);
        }
        client = Redisson.create(config);
        return client.getId();
    }
}
