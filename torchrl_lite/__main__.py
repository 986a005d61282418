from torchrl_lite.cli import main

raise SystemExit(main())
