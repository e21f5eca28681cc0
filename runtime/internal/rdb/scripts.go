package rdb

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua lua/lib/*.lua
var luaFiles embed.FS

// script reads lua/<name>.lua, after the helpers lua/lib/<lib>.lua it
// uses (a script cannot load another, so shared functions are prepended).
// The files are embedded, so a missing one is a build defect and panics at
// package init, never at run time.
func script(name string, libs ...string) *redis.Script {
	s := redis.NewScript(source(name, libs...))
	allScripts = append(allScripts, s)
	scriptNames[s.Hash()] = name
	return s
}

// crossSlotScript is script with the shebang line that lets it touch keys
// of several hash slots of one Redis Cluster node (Redis 7.0+): for a call
// carrying many partitions, whose keys share a node but not a slot. It is
// a separate script (another SHA) because a single Redis needs no flag and
// an embedded one (miniredis) may not parse the line; LoadScripts loads it
// on cluster clients only.
func crossSlotScript(name string, libs ...string) *redis.Script {
	s := redis.NewScript(crossSlotShebang + source(name, libs...))
	clusterScripts = append(clusterScripts, s)
	scriptNames[s.Hash()] = name
	return s
}

// crossSlotShebang must be the script's first line: Redis reads the flags
// only there. allow-oom keeps the single scripts' behaviour at maxmemory:
// a script with a flags line is refused whole at start while memory is
// over the limit ("OOM command not allowed when used memory >
// 'maxmemory'.", measured on 7.0.15) unless it allows OOM, whereas an
// unflagged script runs and Redis checks each command (XACK and
// XREADGROUP run; XGROUP CREATE is refused until the script has written).
// With allow-oom no command of the script is refused for memory: the
// round may also create a lane's missing group (a few bytes) where a
// single read that had written nothing yet would fail.
const crossSlotShebang = "#!lua flags=allow-cross-slot-keys,allow-oom\n"

// source is the text of lua/<name>.lua after its helpers (see script).
func source(name string, libs ...string) string {
	var src []byte
	for _, f := range append(prefixed("lib/", libs), name) {
		b, err := luaFiles.ReadFile("lua/" + f + ".lua")
		if err != nil {
			panic(fmt.Sprintf("seqby: embedded script %s: %v", f, err))
		}
		src = append(src, b...)
	}
	return string(src)
}

func prefixed(dir string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = dir + n
	}
	return out
}

// allScripts is every script, for LoadScripts; filled by script.
var allScripts []*redis.Script

// scriptNames names each script (its file in lua/, without .lua) by its
// SHA1; filled by script and crossSlotScript.
var scriptNames = map[string]string{}

// ScriptName names the script an EVALSHA or EVAL call runs, given the
// call's second argument (the SHA1, or the script's text): its file in
// lua/ without ".lua" ("round" for both of round's variants), or "" when
// it is none of seqby's. Tests use it to pick calls by what they run.
func ScriptName(shaOrText string) string {
	if n, ok := scriptNames[shaOrText]; ok {
		return n
	}
	sum := sha1.Sum([]byte(shaOrText))
	return scriptNames[hex.EncodeToString(sum[:])]
}

// clusterScripts are the scripts LoadScripts loads on a cluster client
// only; filled by crossSlotScript.
var clusterScripts []*redis.Script

var (
	scriptAcquire         = script("acquire", "cold", "wake", "groups")
	scriptReleaseCold     = script("release_cold", "cold", "wake", "groups")
	scriptReap            = script("reap", "cold")
	scriptReapCategories  = script("reap_categories")
	scriptRenew           = script("renew")
	scriptRenewMany       = script("renew_many", "wake")
	scriptName            = script("name", "wake")
	scriptRelease         = script("release", "wake", "groups")
	scriptVerify          = script("verify")
	scriptBeginAttempt    = script("begin_attempt")
	scriptEndAttempt      = script("end_attempt")
	scriptRecord          = script("record")
	scriptOwnedRead       = script("owned_read")
	scriptOwnerClaim      = script("owner_claim")
	scriptOwnerState      = script("owner_state", "groups")
	scriptAppendOnce      = script("append_once")
	scriptRead            = script("read", "groups", "pel", "read")
	scriptReadOldest      = script("read_oldest", "groups", "ids", "pel", "oldest")
	scriptRound           = script("round", "groups", "ids", "pel", "read", "oldest")
	scriptRoundCrossSlot  = crossSlotScript("round", "groups", "ids", "pel", "read", "oldest")
	scriptAck             = script("ack")
	scriptReclaim         = script("reclaim", "groups")
	scriptMember          = script("member")
	scriptLiveMembers     = script("live_members")
	scriptDelIdleConsumer = script("del_idle_consumer")
	scriptSaveState       = script("save_state")
	scriptRecordHalt      = script("record_halt")
	scriptClearHalt       = script("clear_halt")
	scriptResolveHead     = script("resolve_head", "groups", "head")
	scriptCheckHead       = script("check_head", "groups", "head")
	scriptDLQReplay       = script("dlq_replay")
	scriptRegisterGroup   = script("register_group")
	scriptTrim            = script("trim", "ids")
)

// LoadScripts loads every script into the server's script cache. Engines
// call it at start; a single call (Script.Run) also falls back to EVAL on
// NOSCRIPT, and the pipelined calls reload and retry.
func LoadScripts(ctx context.Context, c redis.UniversalClient) error {
	scripts := allScripts
	if _, ok := c.(*redis.ClusterClient); ok {
		scripts = append(scripts[:len(scripts):len(scripts)], clusterScripts...)
	}
	for _, s := range scripts {
		if err := s.Load(ctx, c).Err(); err != nil {
			return fmt.Errorf("load seqby scripts: %w", err)
		}
	}
	return nil
}

// IsNoScript reports a script missing from the server's cache (a restart,
// SCRIPT FLUSH): pipelined EVALSHA has no EVAL fallback.
func IsNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// IsNoGroup reports a missing consumer group (or its stream).
func IsNoGroup(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOGROUP") }
