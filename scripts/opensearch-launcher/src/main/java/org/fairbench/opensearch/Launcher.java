package org.fairbench.opensearch;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.opensearch.common.logging.LogConfigurator;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;
import org.opensearch.transport.Netty4Plugin;

/**
 * One OpenSearch node in this JVM, for fairbench's tests: single-node discovery, HTTP on
 * 127.0.0.1 only, the REST transport (netty4) passed as a plugin class because the server jar
 * ships without modules.
 *
 * Usage: java -Xmx512m -cp 'lib/*:launcher.jar' org.fairbench.opensearch.Launcher HOME HTTP_PORT
 * HOME holds data/ and logs/; it must exist and be writable. With the system properties
 * fairbench.tls.keystore (a PKCS#12 file) and fairbench.tls.password, the REST layer speaks
 * HTTPS only (TlsPlugin, the netty4-secure transport); node-to-node transport stays plain.
 */
public final class Launcher extends Node {

    private static boolean tls() {
        return System.getProperty("fairbench.tls.keystore") != null;
    }

    private Launcher(Environment environment) {
        // The protected constructor is the one that accepts plugin classes from the classpath.
        super(environment, tls() ? List.of(Netty4Plugin.class, TlsPlugin.class) : List.of(Netty4Plugin.class), true);
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: Launcher HOME HTTP_PORT");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        String httpPort = args[1];
        // Empty modules/ and plugins/ folders: every plugin comes in as a class above.
        Files.createDirectories(home.resolve("modules"));
        Files.createDirectories(home.resolve("plugins"));
        Files.createDirectories(home.resolve("config"));
        Settings settings = Settings.builder()
            .put("path.home", home.toString())
            .put("path.data", home.resolve("data").toString())
            .put("path.logs", home.resolve("logs").toString())
            .put("cluster.name", "fairbench")
            .put("node.name", "fairbench-node")
            .put("discovery.type", "single-node")
            .put("network.host", "127.0.0.1")
            .put("http.port", httpPort)
            .put("http.type", tls() ? "netty4-secure" : "netty4")
            .put("transport.port", "0")
            // Test disks are often nearly full; the node must not refuse to allocate the index.
            .put("cluster.routing.allocation.disk.threshold_enabled", false)
            .build();
        LogConfigurator.configureWithoutConfig(settings);
        Environment environment =
            InternalSettingsPreparer.prepareEnvironment(settings, Map.of(), null, () -> "fairbench-node");
        Launcher node = new Launcher(environment);
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                node.close();
            } catch (Exception e) {
                e.printStackTrace();
            } finally {
                stopped.countDown();
            }
        }, "fairbench-shutdown"));
        node.start();
        System.out.println("fairbench: OpenSearch node started, " + (tls() ? "HTTPS" : "HTTP") + " on 127.0.0.1:" + httpPort);
        stopped.await();
    }
}
