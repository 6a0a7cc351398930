package org.elasticsearch.node;

import java.util.Collection;

import org.elasticsearch.env.Environment;
import org.elasticsearch.plugins.ClasspathPluginsService;
import org.elasticsearch.plugins.Plugin;
import org.elasticsearch.plugins.PluginsLoader;
import org.elasticsearch.plugins.PluginsService;

/**
 * A node whose modules are classes on the classpath rather than folders of a distribution.
 * In Elasticsearch's package because the node construction that takes another plugin service
 * is package-private (its test framework's MockNode does the same, but that class starts the
 * whole test harness with it).
 */
public final class ClasspathNode extends Node {
    public ClasspathNode(Environment environment, Collection<Class<? extends Plugin>> modules) {
        super(NodeConstruction.prepareConstruction(environment, null, new NodeServiceProvider() {
            @Override
            PluginsService newPluginService(Environment env, PluginsLoader loader) {
                return new ClasspathPluginsService(env, modules);
            }
        }, true));
    }
}
