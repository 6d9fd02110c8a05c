" The dsh chat: markdown, plus thoughts and tool-call lines.
if exists("b:current_syntax")
  finish
endif
runtime! syntax/markdown.vim
unlet! b:current_syntax
syntax match dshThought /^│ .*$/
syntax match dshCallDone /^✓ .*$/
syntax match dshCallFailed /^✗ .*$/
syntax match dshCallRunning /^[▶…] .*$/
syntax match dshPlanDone /^- \[x\] .*$/
highlight default link dshThought Comment
highlight default link dshCallDone DiagnosticOk
highlight default link dshCallFailed DiagnosticError
highlight default link dshCallRunning DiagnosticInfo
highlight default link dshPlanDone Comment
let b:current_syntax = "dsh"
