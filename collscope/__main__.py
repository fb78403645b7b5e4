from collscope.cli import main

main()
