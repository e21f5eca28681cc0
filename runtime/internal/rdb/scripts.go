package rdb

import (
	"context"
	"embed"
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
	var src []byte
	for _, f := range append(prefixed("lib/", libs), name) {
		b, err := luaFiles.ReadFile("lua/" + f + ".lua")
		if err != nil {
			panic(fmt.Sprintf("seqby: embedded script %s: %v", f, err))
		}
		src = append(src, b...)
	}
	s := redis.NewScript(string(src))
	allScripts = append(allScripts, s)
	return s
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

var (
	scriptAcquire         = script("acquire", "cold")
	scriptReleaseCold     = script("release_cold", "cold")
	scriptReap            = script("reap", "cold")
	scriptRenew           = script("renew")
	scriptRenewMany       = script("renew_many")
	scriptRelease         = script("release")
	scriptVerify          = script("verify")
	scriptBeginAttempt    = script("begin_attempt")
	scriptOwnerClaim      = script("owner_claim")
	scriptOwnerState      = script("owner_state")
	scriptAppendOnce      = script("append_once")
	scriptRead            = script("read", "pel", "read")
	scriptReadOldest      = script("read_oldest", "ids", "pel", "oldest")
	scriptAck             = script("ack")
	scriptReclaim         = script("reclaim")
	scriptMember          = script("member")
	scriptLiveMembers     = script("live_members")
	scriptDelIdleConsumer = script("del_idle_consumer")
	scriptSaveState       = script("save_state")
	scriptRecordHalt      = script("record_halt")
	scriptClearHalt       = script("clear_halt")
	scriptResolveHead     = script("resolve_head", "head")
	scriptCheckHead       = script("check_head", "head")
	scriptDLQReplay       = script("dlq_replay")
	scriptRegisterGroup   = script("register_group")
	scriptTrim            = script("trim", "ids")
)

// LoadScripts loads every script into the server's script cache. Engines
// call it at start; a single call (Script.Run) also falls back to EVAL on
// NOSCRIPT, and the pipelined calls reload and retry.
func LoadScripts(ctx context.Context, c redis.UniversalClient) error {
	for _, s := range allScripts {
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
