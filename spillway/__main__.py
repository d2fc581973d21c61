from spillway.cli.app import main

main()
