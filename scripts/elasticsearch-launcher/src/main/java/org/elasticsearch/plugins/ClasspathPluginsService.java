package org.elasticsearch.plugins;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.elasticsearch.Build;
import org.elasticsearch.action.admin.cluster.node.info.PluginsAndModules;
import org.elasticsearch.env.Environment;

/**
 * The plugin service of a ClasspathNode: the given classes, instantiated as the node would
 * instantiate a module, reported as modules (`GET /_nodes/plugins`). In Elasticsearch's package
 * for the package-private plugin loading it reuses.
 */
public final class ClasspathPluginsService extends PluginsService {
    private final List<LoadedPlugin> loaded;

    public ClasspathPluginsService(Environment environment, Collection<Class<? extends Plugin>> classes) {
        super(environment.settings(), environment.configDir(), new PluginsLoader(Set.of(), Set.of(), Map.of()));
        String version = Build.current().version();
        List<LoadedPlugin> plugins = new ArrayList<>();
        for (Class<? extends Plugin> c : classes) {
            Plugin plugin = loadPlugin(c, environment.settings(), environment.configDir());
            PluginDescriptor descriptor = new PluginDescriptor(c.getName(), "loaded from the classpath", version, version,
                Integer.toString(Runtime.version().feature()), c.getName(), null, List.of(), false, false, false, false);
            plugins.add(new LoadedPlugin(descriptor, plugin, c.getClassLoader()));
        }
        loadExtensions(plugins);
        loaded = List.copyOf(plugins);
    }

    @Override
    protected List<LoadedPlugin> plugins() {
        return loaded;
    }

    @Override
    public PluginsAndModules info() {
        return new PluginsAndModules(List.of(), loaded.stream().map(LoadedPlugin::descriptor).toList());
    }
}
