package rdb

// The names of the earlier key layout (layout 1, docs/upgrading.md) that
// this one no longer writes. MigrateLayout moves the halts and pauses
// they hold into the layout-2 keys, a lease's first acquire takes over
// its generation counter (LeaseRef.Legacy), reap.lua deletes a reaped
// partition's, OwnedRecorded and Faults read an earlier instance's owned count and faults,
// and the rest (attempt marks, notes, owned counts) end with their TTLs.
// They are kept here, and nowhere else, for that. Their formats, as the earlier
// release wrote them:
//
//	category:{key}:__gen__:handler                      string  generation counter
//	category:{key}:__halt__:handler                     string  halt record (JSON)
//	{value}:__pmgen__:pm                                string  a pm's generation counter
//	{value}:__pmhalt__:pm                               string  a pm's halt record (JSON)
//	<lease key>:__attempt__                             string  attempt mark: the token (lease's TTL)
//	<lease key>:__resolved__                            string  resolved note (JSON, 10 min TTL)
//	<lease key>:__paused__                              string  pause note (JSON), no TTL
//	<lease key>:__paused__:__resumed__                  string  "<op> <note>" (10 min TTL)
//	seqby:__halted__:handler                            set     the halt record keys above
//	seqby:__paused__:handler                            set     the pause mark keys above
//	seqby:__pause__:handler                             string  a handler's pause note (JSON), no TTL
//	{seqby:__pause__:handler}:__resumed__               string  "<op> <note>" (10 min TTL)
//	{seqby:__maintenance__}:__gen__                     string  the maintenance leader's generation
//	seqby:__owned__:handler:owner                       string  an instance's owned count (TTL: its membership's)
//	seqby:__admitage__:handler                          zset    admitted confirmation ages (expires with its last)
//	seqby:__faults__:owner                              string  an instance's faults (JSON, TTL 2 × LeaseTTL)

func legacyGenerationKey(stream, group string) string { return SubStream(stream, "__gen__:"+group) }
func legacyHaltKey(stream, group string) string       { return SubStream(stream, "__halt__:"+group) }
func legacyPMGenerationKey(pm, correlation string) string {
	return "{" + correlation + "}:__pmgen__:" + pm
}
func legacyPMHaltKey(pm, correlation string) string { return "{" + correlation + "}:__pmhalt__:" + pm }
func legacyPauseKey(leaseKey string) string         { return leaseKey + ":__paused__" }
func legacyHaltedKey(group string) string           { return "seqby:__halted__:" + group }
func legacyPausedKey(group string) string           { return "seqby:__paused__:" + group }
func legacyControlKey(group string) string          { return "seqby:__pause__:" + group }

func legacyOwnedKey(group, owner string) string { return "seqby:__owned__:" + group + ":" + owner }

func legacyFaultsKey(owner string) string { return "seqby:__faults__:" + owner }

const legacyMaintenanceGeneration = "{seqby:__maintenance__}:__gen__"
