//! Declared vs seen NUMA topology.
