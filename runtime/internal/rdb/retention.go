package rdb

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// GroupsKey is the hash of a category's consumer groups (its handlers),
// each with the id its new groups start reading from:
// "{category}:__groups__", in the category's slot.
func GroupsKey(category string) string { return "{" + category + "}:__groups__" }

// RegisterGroup records group as a consumer of category and returns its
// start id ("0", or the Redis time of its first registration with
// onlyNew). A group registered before keeps its start.
func RegisterGroup(ctx context.Context, c redis.UniversalClient, category, group string, onlyNew bool) (string, error) {
	mode := "retained"
	if onlyNew {
		mode = "new"
	}
	start, err := scriptRegisterGroup.Run(ctx, c, []string{GroupsKey(category)}, group, mode).Text()
	if err != nil {
		return "", fmt.Errorf("register group %s of %s: %w", group, category, err)
	}
	return start, nil
}

// Trim removes the entries of stream that every consumer group has acked,
// creating the groups registered for its category (groups, as Groups read
// them just before: a list older than a new handler's registration would
// let its entries go) that are missing on it first (from id 0, so they
// keep everything), and returns how many it removed. Never call it on a
// dead-letter stream: its entries stay until an operator removes them.
func Trim(ctx context.Context, c redis.UniversalClient, groups []string, stream string) (int64, error) {
	args := make([]any, len(groups))
	for i, g := range groups {
		args[i] = g
	}
	n, err := scriptTrim.Run(ctx, c, []string{stream}, args...).Int64()
	if err != nil {
		return 0, fmt.Errorf("trim %s: %w", stream, err)
	}
	return n, nil
}
