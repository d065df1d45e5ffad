// Package scaffold is the computational core of poolrun's embedded default
// workload: a small network of cells built in the spirit of the Brain Scaffold
// Builder. It knows nothing of the job pool or the cache; the command wires its
// functions into jobs and its [Index] into a cache item.
//
// # The workload
//
// A [Config] (YAML, see [ParseConfig] and the embedded [DefaultConfig]) describes
// a box cut into a grid of chunks, cell types with densities, and connection
// rules "from type, to type, within a maximum distance". [LoadConfig] reads
// one from a regular file of at most [MaxConfigSize] (16 MiB), refusing a
// larger file with [regfile.ErrTooLarge] before reading it, and a named
// pipe, a device (an endless one such as /dev/zero) or a directory at
// once. A run is:
//
//  1. Placement: one [Place] job per (cell type, chunk), in any order.
//  2. Connectivity: one [Connect] job per (rule, chunk), each after the
//     placement of the rule's target type in that chunk and of every chunk of
//     the rule's source type. Every job of a rule needs the [Index] of the
//     source type, built by [BuildIndex] from all the placement files of that
//     type: the expensive item worth caching while jobs of the rules from that
//     type remain, and worth freeing afterwards ([Config.RulesFrom]).
//  3. [Checksum] and [Summary] describe the result.
//
// With the default configuration that is 96 placement jobs and 120
// connectivity jobs; the index of the granule cells holds about 39 MiB, that of
// the glomeruli about 15 MiB. [Config.Scaled] makes the box smaller or larger
// with the same jobs.
//
// # Units
//
// Lengths (box, chunks, radii, distances) are in micrometres (µm); densities
// in cells per cubic millimetre. Positions are float32 µm from the box's
// corner at the origin.
//
// # Determinism
//
// The output depends only on the configuration. Placement in a chunk draws
// from a random stream seeded by (seed, cell type, chunk); a connection's
// random number is a function of (seed, rule, source id, target id). So the
// files, the [Summary] and the [Checksum] are the same for any number of
// workers, in any order of jobs, in any process, for any index grid.
//
// Global ids number the cells of one type from 0 in chunk order
// ([Config.Chunks]), then in file order within a chunk, so that the first id
// of a chunk follows from the configuration without reading any file.
//
// # Files
//
// Under the output folder:
//
//	placement/<cell type>/<X-Y-Z>.bin     positions of the cells of a chunk
//	connectivity/<rule>/<X-Y-Z>.bin       (source id, target id) pairs whose target is in the chunk
//
// Each file has a 24-byte header (magic "PRpl" or "PRcn", format version,
// [Config.Hash] of the configuration that wrote it, record count), then
// little-endian records: float32 x, y, z (12 bytes) for placement, uint32
// source id and target id (8 bytes) for connectivity. Readers check the header
// and refuse a file of another configuration.
//
// Every file is written to a temporary name in its folder (".<name>.tmp-*")
// and renamed, so that an interrupted run never leaves a partial file under
// the final name; the temporary file is removed on error. A process killed
// outright can leave a temporary file behind, which [RemoveTemp] removes. Files
// are not synced to disk: the guarantee is against interrupted processes, not
// power cuts.
//
// # Concurrency
//
// A [Config] and an [Index] are read-only once built and safe for concurrent
// use. Jobs for different (type, chunk) or (rule, chunk) pairs write different
// files and may run concurrently in any processes.
package scaffold
