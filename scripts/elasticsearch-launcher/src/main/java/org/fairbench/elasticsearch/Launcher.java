package org.fairbench.elasticsearch;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.elasticsearch.common.logging.LogConfigurator;
import org.elasticsearch.common.settings.Settings;
import org.elasticsearch.env.Environment;
import org.elasticsearch.node.ClasspathNode;
import org.elasticsearch.node.InternalSettingsPreparer;
import org.elasticsearch.transport.netty4.Netty4Plugin;

/**
 * One Elasticsearch node in this JVM, for fairbench's tests: single-node discovery, HTTP on
 * 127.0.0.1 only, no security (the server jar holds none), the REST and node transports
 * (netty4) and GET / (RootPlugin) passed as classes because the server jar ships without the
 * distribution's modules.
 *
 * Usage: java -Xmx512m -cp 'lib/*:launcher.jar' org.fairbench.elasticsearch.Launcher HOME HTTP_PORT
 * HOME holds data/ and logs/; it must exist and be writable. With the system properties
 * fairbench.tls.cert and fairbench.tls.key (PEM files), the REST layer speaks HTTPS only
 * (TlsPlugin); node-to-node transport stays plain.
 */
public final class Launcher {
    private Launcher() {}

    private static boolean tls() {
        return System.getProperty("fairbench.tls.cert") != null;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: Launcher HOME HTTP_PORT");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        String httpPort = args[1];
        // Empty modules/ and plugins/ folders: every module comes in as a class below.
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
            .put("http.type", tls() ? TlsPlugin.HTTP_TYPE : "netty4")
            .put("transport.type", "netty4")
            .put("transport.port", "0")
            // Test disks are often nearly full; the node must not refuse to allocate the index.
            .put("cluster.routing.allocation.disk.threshold_enabled", false)
            .build();
        LogConfigurator.configureWithoutConfig(settings);
        Environment environment =
            InternalSettingsPreparer.prepareEnvironment(settings, Map.of(), null, () -> "fairbench-node");
        ClasspathNode node = new ClasspathNode(environment, tls()
            ? List.of(Netty4Plugin.class, RootPlugin.class, TlsPlugin.class)
            : List.of(Netty4Plugin.class, RootPlugin.class));
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
        System.out.println("fairbench: Elasticsearch node started, " + (tls() ? "HTTPS" : "HTTP") + " on 127.0.0.1:" + httpPort);
        stopped.await();
    }
}
