/**
 * Implementation details of the AgentScope-Java 2.x adapters. Not public API: public only because
 * Java has no narrower visibility across packages; anything here may change in any release.
 */
package dev.agentscopememory.agentscope2.internal;
