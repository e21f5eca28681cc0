package annotations

import "go/token"

func tokenPos(i int) token.Pos { return token.Pos(i) }
