package rdb

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

var scriptCheckHead = script("check_head", "head")

// CheckHead runs ResolveHead's checks on the head r describes (raw is the
// record as read) without acting: nil when ResolveHead would act now, a
// *ResolveError when it would refuse. It writes nothing: an operator's dry
// run.
func CheckHead(ctx context.Context, c redis.UniversalClient, handler string, r HaltRecord, raw string) error {
	reply, err := scriptCheckHead.Run(ctx, c, []string{r.RecordKey(), r.Stream, r.LeaseKey}, raw, r.Token, handler, r.EntryID).StringSlice()
	if err != nil {
		return err
	}
	if len(reply) != 2 {
		return fmt.Errorf("unexpected reply %v", reply)
	}
	for _, code := range []error{ErrResolveNotHalted, ErrResolveRetrying, ErrResolveStale, ErrResolveNotHead} {
		if reply[0] == code.Error() {
			return &ResolveError{Code: code, Detail: reply[1]}
		}
	}
	if reply[0] != "OK" {
		return fmt.Errorf("unexpected reply %v", reply)
	}
	return nil
}
