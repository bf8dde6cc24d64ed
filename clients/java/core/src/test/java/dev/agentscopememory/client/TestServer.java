package dev.agentscopememory.client;

import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The real Python server, started from the repository's {@code .venv} on an ephemeral port
 * ({@code --port 0 --port-file}), with its sqlite store in a temporary directory.
 *
 * <p>Public, and shipped in this module's test-jar, because the tests of every adapter module
 * start the server the same way.
 */
public final class TestServer implements AutoCloseable {

    private static final Object SHARED_LOCK = new Object();
    private static TestServer shared;

    private final Path dataDir;
    private final Path log;
    private final Process process;
    private final int port;

    private final Map<String, String> env;
    private final List<String> extraArgs;

    private TestServer(Path dataDir, int fixedPort, Map<String, String> env) throws IOException, InterruptedException {
        this(dataDir, fixedPort, env, List.of());
    }

    private TestServer(Path dataDir, int fixedPort, Map<String, String> env, List<String> extraArgs)
            throws IOException, InterruptedException {
        this.dataDir = dataDir;
        this.env = env;
        this.extraArgs = extraArgs;
        Path repo = repo();
        Path exe = repo.resolve(".venv/bin/agentscope-memory");
        if (!Files.isExecutable(exe)) {
            throw new IllegalStateException(exe + " not found: run `make install` (or `make gen`) in "
                    + repo + " first");
        }
        Path portFile = dataDir.resolve("port");
        Files.deleteIfExists(portFile);
        log = Files.createTempFile("agentscope-memory-server", ".log");
        List<String> cmd = new ArrayList<>(List.of(exe.toString(), "serve",
                "--host", "127.0.0.1",
                "--port", Integer.toString(fixedPort),
                "--port-file", portFile.toString(),
                "--data-dir", dataDir.toString(),
                "--store", "sqlite",
                "--log-format", "text",
                "--log-level", "WARNING"));
        cmd.addAll(extraArgs); // later flags win, e.g. --store postgres
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true)
                .redirectOutput(log.toFile());
        pb.environment().put("MEM0_TELEMETRY", "False");
        pb.environment().putAll(env);
        process = pb.start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        Integer bound = null;
        while (System.nanoTime() < deadline) {
            if (Files.exists(portFile)) {
                String text = Files.readString(portFile, StandardCharsets.UTF_8).trim();
                if (!text.isEmpty()) {
                    bound = Integer.parseInt(text);
                    break;
                }
            }
            if (!process.isAlive()) {
                throw new IllegalStateException("the server exited with " + process.exitValue()
                        + ":\n" + Files.readString(log));
            }
            Thread.sleep(20);
        }
        if (bound == null) {
            process.destroyForcibly();
            throw new IllegalStateException("the server did not report its port within 60 s:\n"
                    + Files.readString(log));
        }
        port = bound;
    }

    /**
     * The repository holding {@code .venv}: {@code -Dagentscope.memory.repo} (the pom passes it),
     * else three levels above the working directory, as seen from {@code clients/java/<module>}.
     */
    public static Path repo() {
        return Path.of(System.getProperty("agentscope.memory.repo", "../../..")).toAbsolutePath().normalize();
    }

    /** A new server with its own data directory. */
    public static TestServer start() throws IOException, InterruptedException {
        return start(Map.of());
    }

    /** A new server with extra environment, e.g. {@code AGENTSCOPE_MEMORY_API_KEYS}. */
    public static TestServer start(Map<String, String> env) throws IOException, InterruptedException {
        return new TestServer(Files.createTempDirectory("agentscope-memory-data"), 0, env);
    }

    /** A new server with extra command-line flags, e.g. {@code --store postgres --postgres-dsn ...}. */
    public static TestServer start(Map<String, String> env, List<String> extraArgs) throws IOException, InterruptedException {
        return new TestServer(Files.createTempDirectory("agentscope-memory-data"), 0, env, List.copyOf(extraArgs));
    }

    /** A server on the same data directory and port as a stopped one (a restart). */
    public static TestServer restart(TestServer stopped) throws IOException, InterruptedException {
        return new TestServer(stopped.dataDir, stopped.port, stopped.env, stopped.extraArgs);
    }

    /** One server for the whole test run, stopped when the JVM exits. */
    public static TestServer shared() throws IOException, InterruptedException {
        synchronized (SHARED_LOCK) {
            if (shared == null) {
                shared = start();
                TestServer s = shared;
                Runtime.getRuntime().addShutdownHook(new Thread(s::close));
            }
            return shared;
        }
    }

    public int port() {
        return port;
    }

    public String target() {
        return "127.0.0.1:" + port;
    }

    public ManagedChannel channel() {
        return ManagedChannelBuilder.forTarget(target()).usePlaintext().build();
    }

    public String log() throws IOException {
        return Files.readString(log);
    }

    /** Stops the server (SIGTERM, then SIGKILL after 15 s); its data stays for a restart. */
    public void stop() {
        if (!process.isAlive()) {
            return;
        }
        process.destroy();
        try {
            if (!process.waitFor(15, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }

    /** Stops the server and deletes its data directory and log. */
    @Override
    public void close() {
        stop();
        try (var paths = Files.walk(dataDir)) {
            paths.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            Files.deleteIfExists(log);
        } catch (IOException ignored) {
            // best effort: a temporary directory
        }
    }

    /** Kills the server at once, as a crash would. */
    public void kill() throws InterruptedException {
        process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
    }
}
