package org.fairbench.hivemq;

import java.io.IOException;
import java.io.OutputStream;
import java.lang.reflect.Method;
import java.net.InetSocketAddress;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.LongAdder;
import java.util.jar.JarFile;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.AppenderBase;
import com.codahale.metrics.Counter;
import com.codahale.metrics.Gauge;
import com.codahale.metrics.MetricRegistry;
import com.hivemq.configuration.info.SystemInformation;
import com.hivemq.configuration.service.FullConfigurationService;
import com.hivemq.configuration.service.InternalConfigurations;
import com.hivemq.configuration.service.MqttConfigurationService;
import com.hivemq.configuration.service.RestrictionsConfigurationService;
import com.hivemq.embedded.EmbeddedHiveMQ;
import com.sun.net.httpserver.HttpServer;
import org.slf4j.LoggerFactory;

/**
 * One HiveMQ Community Edition broker in this JVM, for fairbench's tests: its embedded jar from
 * Maven Central, a config.xml written here (listeners on 127.0.0.1 only, in-memory persistence,
 * anonymous usage statistics off: this machine reaches no one), and a small HTTP endpoint on
 * 127.0.0.1 that says what HiveMQ publishes nowhere else (it has no $SYS topics).
 *
 * Usage: java -cp 'lib/*:launcher.jar' org.fairbench.hivemq.Launcher HOME MQTT_PORT TLS_PORT MONITOR_PORT
 * HOME holds conf/, data/ and extensions/; it must be writable. TLS_PORT 0 starts no TLS
 * listener; otherwise the system properties fairbench.tls.keystore (a PKCS#12 file) and
 * fairbench.tls.password give its certificate.
 *
 * GET http://127.0.0.1:MONITOR_PORT/hivemq answers JSON: the version, the effective settings
 * read back from HiveMQ's own configuration services (not from the file written here), every
 * counter and numeric gauge of HiveMQ's metric registry (com.hivemq.messages.dropped.count among
 * them) and the dropped messages counted by the reason HiveMQ gives (its event.message-dropped
 * log). The same document, as at start-up, is written to HOME/hivemq.json.
 */
public final class Launcher {

    /** Dropped messages by the reason HiveMQ's event log gives, for a subscriber or a group. */
    private static final Map<String, LongAdder> DROPPED = new ConcurrentHashMap<>();

    private Launcher() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: Launcher HOME MQTT_PORT TLS_PORT MONITOR_PORT");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        int mqttPort = Integer.parseInt(args[1]);
        int tlsPort = Integer.parseInt(args[2]);
        int monitorPort = Integer.parseInt(args[3]);
        Path conf = Files.createDirectories(home.resolve("conf"));
        Path data = Files.createDirectories(home.resolve("data"));
        Path extensions = Files.createDirectories(home.resolve("extensions"));
        Files.writeString(conf.resolve("config.xml"), config(mqttPort, tlsPort));

        EmbeddedHiveMQ hivemq = EmbeddedHiveMQ.builder()
            .withConfigurationFolder(conf)
            .withDataFolder(data)
            .withExtensionsFolder(extensions)
            .build();
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                hivemq.close();
            } catch (Exception e) {
                e.printStackTrace();
            } finally {
                stopped.countDown();
            }
        }, "fairbench-shutdown"));
        hivemq.start().join();
        countDroppedByReason();

        Object injector = injector(hivemq);
        String version = version(instance(injector, SystemInformation.class));
        Map<String, String> settings = settings(instance(injector, FullConfigurationService.class));
        MetricRegistry metrics = hivemq.getMetricRegistry();

        HttpServer http = HttpServer.create(new InetSocketAddress("127.0.0.1", monitorPort), 0);
        http.createContext("/hivemq", exchange -> {
            byte[] body = document(version, settings, metrics).getBytes(StandardCharsets.UTF_8);
            exchange.getResponseHeaders().set("content-type", "application/json");
            exchange.sendResponseHeaders(200, body.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(body);
            }
        });
        http.start();
        Files.writeString(home.resolve("hivemq.json"), document(version, settings, metrics));
        System.out.println("fairbench: HiveMQ " + version + " started, MQTT on 127.0.0.1:" + mqttPort
            + (tlsPort > 0 ? ", MQTT over TLS on 127.0.0.1:" + tlsPort : "")
            + ", monitor on http://127.0.0.1:" + monitorPort + "/hivemq");
        System.out.flush();
        stopped.await();
    }

    /** The config.xml of this broker: loopback listeners, the queue and persistence stated. */
    private static String config(int mqttPort, int tlsPort) {
        StringBuilder xml = new StringBuilder();
        xml.append("<?xml version=\"1.0\"?>\n<hivemq>\n  <listeners>\n")
            .append("    <tcp-listener><port>").append(mqttPort)
            .append("</port><bind-address>127.0.0.1</bind-address><name>mqtt</name></tcp-listener>\n");
        if (tlsPort > 0) {
            String keystore = System.getProperty("fairbench.tls.keystore");
            String password = System.getProperty("fairbench.tls.password", "");
            if (keystore == null) {
                throw new IllegalArgumentException("a TLS port needs -Dfairbench.tls.keystore=FILE.p12");
            }
            xml.append("    <tls-tcp-listener><port>").append(tlsPort)
                .append("</port><bind-address>127.0.0.1</bind-address><name>mqtts</name>\n")
                .append("      <tls><keystore><path>").append(escape(keystore)).append("</path><password>")
                .append(escape(password)).append("</password><private-key-password>").append(escape(password))
                .append("</private-key-password></keystore></tls>\n    </tls-tcp-listener>\n");
        }
        // HiveMQ's defaults, written out so the file says what the broker runs with: a queue of
        // 1,000 QoS 1/2 messages per client (Mosquitto's max_queued_messages here too) that
        // discards the newest message when full.
        xml.append("  </listeners>\n  <mqtt>\n    <queued-messages><max-queue-size>1000</max-queue-size>")
            .append("<strategy>discard</strategy></queued-messages>\n  </mqtt>\n")
            // As Mosquitto runs with persistence false: sessions and queues in memory only.
            .append("  <persistence><mode>in-memory</mode></persistence>\n")
            .append("  <anonymous-usage-statistics><enabled>false</enabled></anonymous-usage-statistics>\n")
            .append("</hivemq>\n");
        return xml.toString();
    }

    private static String escape(String text) {
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;");
    }

    /** The settings as HiveMQ's configuration services hold them once it has started. */
    private static Map<String, String> settings(FullConfigurationService config) {
        Map<String, String> out = new TreeMap<>();
        MqttConfigurationService mqtt = config.mqttConfiguration();
        RestrictionsConfigurationService restrictions = config.restrictionsConfiguration();
        out.put("max-queued-messages", Long.toString(mqtt.maxQueuedMessages()));
        out.put("queued-messages-strategy", mqtt.getQueuedMessagesStrategy().name().toLowerCase());
        out.put("persistence-mode", config.persistenceConfigurationService().getMode().name().toLowerCase());
        // HiveMQ CE has none: its config.xsd names no overload protection, and nothing in it reads
        // the throttling level the extension SDK lets an authenticator set.
        out.put("overload-protection", "none (not part of HiveMQ Community Edition)");
        // What bounds delivery to one subscriber: at most this many unacknowledged QoS 1/2
        // PUBLISHes (or the client's Receive Maximum in MQTT 5, if smaller); QoS 0 messages queue
        // per client up to a memory limit.
        out.put("max-inflight-window", Integer.toString(InternalConfigurations.MAX_INFLIGHT_WINDOW_SIZE_MESSAGES));
        out.put("qos0-memory-limit-per-client-bytes",
            Integer.toString(InternalConfigurations.QOS_0_MEMORY_LIMIT_PER_CLIENT_BYTES.get()));
        out.put("server-receive-maximum", Integer.toString(mqtt.serverReceiveMaximum()));
        out.put("max-packet-size", Integer.toString(mqtt.maxPacketSize()));
        out.put("max-connections", Long.toString(restrictions.maxConnections()));
        out.put("shared-subscriptions", Boolean.toString(mqtt.sharedSubscriptionsEnabled()));
        out.put("retained-messages", Boolean.toString(mqtt.retainedMessagesEnabled()));
        out.put("maximum-qos", Integer.toString(mqtt.maximumQos().getQosNumber()));
        out.put("anonymous-usage-statistics", Boolean.toString(config.usageStatisticsConfiguration().isEnabled()));
        StringBuilder listeners = new StringBuilder();
        config.listenerConfiguration().getListeners().forEach(l -> {
            if (listeners.length() > 0) {
                listeners.append(", ");
            }
            listeners.append(l.getName()).append(' ').append(l.getBindAddress()).append(':').append(l.getPort());
        });
        out.put("listeners", listeners.toString());
        return out;
    }

    /**
     * The HiveMQ-Version of the jar the broker was loaded from. HiveMQ's own SystemInformation
     * says "Development Snapshot" when it is embedded (it looks for its manifest where the
     * packaged broker keeps it), so that is the fallback only.
     */
    private static String version(SystemInformation info) {
        try {
            URL jar = com.hivemq.HiveMQServer.class.getProtectionDomain().getCodeSource().getLocation();
            try (JarFile file = new JarFile(Path.of(jar.toURI()).toFile())) {
                String version = file.getManifest().getMainAttributes().getValue("HiveMQ-Version");
                if (version != null) {
                    return version;
                }
            }
        } catch (Exception ignored) {
            // The fallback below.
        }
        return info.getHiveMQVersion();
    }

    /** HiveMQ's Guice injector: the embedded broker keeps it package-private. */
    private static Object injector(EmbeddedHiveMQ hivemq) throws ReflectiveOperationException {
        Method method = hivemq.getClass().getDeclaredMethod("getInjector");
        method.setAccessible(true);
        return method.invoke(hivemq);
    }

    private static <T> T instance(Object injector, Class<T> type) throws ReflectiveOperationException {
        Method method = injector.getClass().getMethod("getInstance", Class.class);
        method.setAccessible(true);
        return type.cast(method.invoke(injector, type));
    }

    /**
     * HiveMQ logs each dropped outgoing message on event.message-dropped at DEBUG, with the
     * reason as its last argument ("The client message queue is full", "The shared subscription
     * message queue is full", "The QoS 0 memory limit exceeded, …"): counted here, by reason,
     * without writing the lines anywhere.
     */
    private static void countDroppedByReason() {
        LoggerContext context = (LoggerContext) LoggerFactory.getILoggerFactory();
        Logger logger = context.getLogger("event.message-dropped");
        AppenderBase<ILoggingEvent> counter = new AppenderBase<>() {
            @Override
            protected void append(ILoggingEvent event) {
                Object[] args = event.getArgumentArray();
                String reason = args != null && args.length > 0 ? String.valueOf(args[args.length - 1]) : event.getMessage();
                // The QoS 0 limit's reason carries the sizes; keep its words only.
                int comma = reason.indexOf(", size:");
                if (comma > 0) {
                    reason = reason.substring(0, comma);
                }
                DROPPED.computeIfAbsent(reason, r -> new LongAdder()).increment();
            }
        };
        counter.setContext(context);
        counter.setName("fairbench-dropped-by-reason");
        counter.start();
        logger.addAppender(counter);
        logger.setAdditive(false);
        logger.setLevel(Level.DEBUG);
    }

    /** The monitor's JSON document. */
    private static String document(String version, Map<String, String> settings, MetricRegistry registry) {
        Map<String, Object> metrics = new TreeMap<>();
        for (Map.Entry<String, Counter> e : registry.getCounters().entrySet()) {
            metrics.put(e.getKey(), e.getValue().getCount());
        }
        for (Map.Entry<String, Gauge> e : registry.getGauges().entrySet()) {
            Object value;
            try {
                value = e.getValue().getValue();
            } catch (RuntimeException ignored) {
                continue;
            }
            if (value instanceof Number) {
                metrics.put(e.getKey(), value);
            }
        }
        Map<String, Object> dropped = new TreeMap<>();
        DROPPED.forEach((reason, count) -> dropped.put(reason, count.sum()));
        StringBuilder json = new StringBuilder("{\"broker\":\"HiveMQ Community Edition\",\"version\":");
        string(json, version);
        json.append(",\"settings\":");
        object(json, settings);
        json.append(",\"metrics\":");
        object(json, metrics);
        json.append(",\"dropped_by_reason\":");
        object(json, dropped);
        return json.append("}\n").toString();
    }

    private static void object(StringBuilder json, Map<String, ?> map) {
        json.append('{');
        boolean first = true;
        for (Map.Entry<String, ?> e : map.entrySet()) {
            if (!first) {
                json.append(',');
            }
            first = false;
            string(json, e.getKey());
            json.append(':');
            Object value = e.getValue();
            if (value instanceof Number n && Double.isFinite(n.doubleValue())) {
                json.append(n);
            } else {
                string(json, String.valueOf(value));
            }
        }
        json.append('}');
    }

    private static void string(StringBuilder json, String text) {
        json.append('"');
        for (char c : text.toCharArray()) {
            switch (c) {
                case '"' -> json.append("\\\"");
                case '\\' -> json.append("\\\\");
                default -> {
                    if (c < 0x20) {
                        json.append(String.format("\\u%04x", (int) c));
                    } else {
                        json.append(c);
                    }
                }
            }
        }
        json.append('"');
    }
}
